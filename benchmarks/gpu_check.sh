#!/usr/bin/env bash
# The prepared GPU run (issue 26): everything a lent GPU machine's minutes are for, in one
# command, each stage under its own time budget, logs under $OUT (8 files at most).
#
#   bash benchmarks/gpu_check.sh             # on the GPU machine, from the repository root
#   bash benchmarks/gpu_check.sh --dry-run   # here, on the CPU: same stages, the strict /
#                                            # simulated backends, tiny sizes
#
# On the GPU machine it first installs what its image lacks from the wheels carried in
# .whl/ (git-ignored; see docs/benchmarks.md for the download command): pytest-asyncio
# always, MPICH (unpacked, for mpiexec and libmpi) and mpi4py only where the image's own
# cannot run. Stages, in order:
#   env       nvidia-smi and the versions, so the figures name their device
#   gpu_tests pytest -m gpu (CuPy backend, fusion, CUDA graphs, 2-rank CuPy, COCO on CuPy)
#   matrix    the op matrix, training, checkpoint, result-form, example and seed-script
#             tests, every job on the GPU (AIOFLOW_DEVICE=gpu)
#   parity    benchmarks/gpu_parity.py: numpy vs CuPy, MLP and LeNet, 10 and 30 steps
#   depth     benchmarks/pipeline_depth.py --device gpu (images/s at depth 1-3, GPU busy,
#             loop gap, PyTorch CUDA eager)
#   steps     benchmarks/train_step.py --device gpu (eager / fused / graph vs PyTorch)
# summary.txt gets one line per stage (exit code, seconds used of its budget).
set -u
cd "$(dirname "$0")/.."
REPO=$PWD
DRY=0
[ "${1:-}" = "--dry-run" ] && DRY=1
OUT=${OUT:-/tmp/aioflow_gpu_check}
mkdir -p "$OUT"
: > "$OUT/summary.txt"
T0=$(date +%s)

stage() {   # stage NAME BUDGET_SECONDS COMMAND...
    local name=$1 budget=$2
    shift 2
    local start rc
    start=$(date +%s)
    echo "== $name (budget ${budget}s) ==" >> "$OUT/$name.log"
    PYTHONUNBUFFERED=1 timeout -k 5 "$budget" "$@" >> "$OUT/$name.log" 2>&1
    rc=$?
    local line="stage $name: rc=$rc in $(( $(date +%s) - start ))s of ${budget}s (t=$(( $(date +%s) - T0 ))s)"
    [ $rc -eq 124 ] && line="$line TIMED OUT"
    echo "$line" | tee -a "$OUT/summary.txt"
    tail -n 3 "$OUT/$name.log" | sed 's/^/    /' | tee -a "$OUT/summary.txt"
}

# -- set-up: carried wheels, MPI -----------------------------------------------------------
PY=${GPU_CHECK_PYTHON:-python3}     # the interpreter (tests pass their own)
if [ $DRY -eq 1 ]; then
    [ -z "${GPU_CHECK_PYTHON:-}" ] && [ -x .venv/bin/python ] && PY=$REPO/.venv/bin/python
    DEVICE=strict
else
    DEVICE=gpu
    SITE=/tmp/aioflow_site
    if ls .whl/pytest_asyncio-*.whl >/dev/null 2>&1; then
        $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$SITE" \
            .whl/pytest_asyncio-*.whl > "$OUT/env.log" 2>&1
    fi
    export PYTHONPATH=$SITE
    if ! { $PY -c "from mpi4py import MPI" && command -v mpiexec; } >/dev/null 2>&1; then
        if ls .whl/mpich-*.whl >/dev/null 2>&1; then   # pip --target drops its lib/ folder
            $PY -m zipfile -e .whl/mpich-*.whl /tmp/aioflow_mpich
            MPICH=$(echo /tmp/aioflow_mpich/mpich-*.data/data)
            chmod +x "$MPICH"/bin/*
            export PATH=$MPICH/bin:$PATH LD_LIBRARY_PATH=$MPICH/lib:${LD_LIBRARY_PATH:-}
        fi
        if ! $PY -c "from mpi4py import MPI" >/dev/null 2>&1 && ls .whl/mpi4py-*.whl >/dev/null 2>&1; then
            $PY -m pip install -q --no-index --no-deps --no-compile --target "$SITE" \
                .whl/mpi4py-*.whl >> "$OUT/env.log" 2>&1
        fi
    fi
fi
export PYTHONPATH=$REPO${PYTHONPATH:+:$PYTHONPATH}
export AIOFLOW_OFFLINE=1
# The GPU machine runs commands as root, and its Open MPI's mpiexec refuses root unless told
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

stage env 60 bash -c "(command -v nvidia-smi >/dev/null && nvidia-smi \
    --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv); \
    echo cores \$(nproc); $PY benchmarks/device_report.py; echo mpiexec \$(command -v mpiexec)"

XDIST=""
if $PY -c "import xdist" >/dev/null 2>&1; then XDIST="-n 8"; fi
PYTEST="$PY -m pytest -q -p no:cacheprovider -p no:benchmark -rfEs --continue-on-collection-errors"

if [ $DRY -eq 1 ]; then
    # The GPU tests skip here (they say why); the device paths they cover run on strict.
    # Small sizes: tests/test_gpu_check.py runs this dry run in CI, to catch a typo here
    # before a GPU's minutes are spent on it.
    stage gpu_tests 300 $PYTEST -m gpu tests/backends tests/distributed/test_mpi.py \
        tests/data/test_coco_reader.py
    stage matrix 300 env AIOFLOW_DEVICE=strict $PYTEST tests/ops/test_op_matrix.py -k "relu or matmul"
    stage parity 300 bash -c "cd benchmarks && $PY gpu_parity.py --device strict --steps 3 --models mlp"
    stage depth 120 bash -c "cd benchmarks && $PY pipeline_depth.py --device simulated --batches 4 --rounds 1 --models mlp"
    stage steps 300 bash -c "cd benchmarks && $PY train_step.py --device cpu --images 300 --batches 100 \
        --models mlp --cases 'aioflow eager' 'aioflow fused' 'aioflow graph'"
else
    # Budgets sum to 7.5 minutes at most (the H200 took under 3): a start and a rerun fit in
    # the 15 minutes of device time a session has.
    stage gpu_tests 120 $PYTEST -v -m gpu tests/backends tests/distributed/test_mpi.py \
        tests/data/test_coco_reader.py
    stage matrix 170 env AIOFLOW_DEVICE=gpu $PYTEST $XDIST tests/ops \
        tests/test_variables_and_training.py tests/test_checkpoint_api.py \
        tests/test_job_results.py tests/test_examples.py tests/runtime/test_result_forms.py \
        tests/test_seed_scripts.py
    stage parity 50 bash -c "cd benchmarks && $PY gpu_parity.py"
    stage depth 50 bash -c "cd benchmarks && $PY pipeline_depth.py --device gpu --batches 60 --rounds 3"
    # torch.compile takes minutes to compile four cases: a later run's, not this one's
    stage steps 50 bash -c "cd benchmarks && $PY train_step.py --device gpu --images 3000 \
        --cases 'aioflow eager' 'aioflow fused' 'aioflow graph' 'torch eager'"
fi
echo "total $(( $(date +%s) - T0 ))s" | tee -a "$OUT/summary.txt"
