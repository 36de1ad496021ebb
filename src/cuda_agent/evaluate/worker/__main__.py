from cuda_agent.evaluate.worker.serve import main

main()
