from cuda_agent.cli import main

raise SystemExit(main())
