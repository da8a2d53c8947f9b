#!/usr/bin/env bash
# Issue 12's GPU figures on a lent GPU machine (torch 2.11 and PyG there, no DGL; pymetis and Dask carried
# as wheels, see the README's Benchmarks section). Every log goes to OUTDIR (default gpu-figures/).
#
#   bash benchmarks/gpu_figures.sh OUTDIR
#
# 1. full_graph.py on the 100k-vertex / 4M-edge SBM of the CPU runs, one rank (thread ranks never share a
#    GPU): PyG's GCNConv in the same run, one rank against the SpMM bandwidth bound, a profile; again with
#    the Triton kernel (--kernel triton, i.e. train.kernel=triton).
# 2. The same on a larger SBM (1M vertices, 40M edges, 128 features, hidden 128).
# 3. The CUDA kernels alone against the bound (spmm_gpu.py: cuSPARSE int64/int32, Triton shapes).
# 4. The Dask runner with one worker on the GPU: the NCCL process group (one GPU: one rank).
set -u
out=${1:-gpu-figures}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 TQDM_DISABLE=1 PYTHONFAULTHANDLER=1
py=${PYTHON:-python3}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$out/gpu.txt"
g100=sbm:num_nodes=100000,num_blocks=16,avg_degree=40,num_features=64,seed=0
timeout -s ABRT 150 "$py" benchmarks/full_graph.py --device cuda --no-dgl --pyg --ranks 1 --epochs 30 --repeats 3 \
    --bound --profile 1 --json "$out/full_graph_100k.json" 2>&1 | grep -v "^STAGE" | tee "$out/full_graph_100k.log"
timeout -s ABRT 100 "$py" benchmarks/full_graph.py --kernel triton --device cuda --no-dgl --ranks 1 --epochs 30 \
    --repeats 3 --bound 2>&1 | tee "$out/full_graph_100k_triton.log"
big=sbm:num_nodes=1000000,num_blocks=64,avg_degree=40,num_features=128,seed=0
timeout -s ABRT 200 "$py" benchmarks/full_graph.py --device cuda --no-dgl --pyg --graph "$big" --hidden 128 --ranks 1 \
    --epochs 10 --repeats 1 --bound --json "$out/full_graph_1m.json" 2>&1 | tee "$out/full_graph_1m.log"
[ "${SKIP_KERNELS:-0}" = 1 ] || timeout -s ABRT 200 "$py" benchmarks/spmm_gpu.py 2>&1 | tee "$out/spmm_gpu.log"
timeout -s ABRT 120 "$py" -m workbench run full_graph --graph "$g100" --runner dask --workers 1 --device cuda \
    --epochs 10 --out /tmp/runs --json 2>&1 | tail -c 600 | tee "$out/dask_nccl.log"
"$py" -m workbench run full_graph --graph karate --workers 2 --device cuda --epochs 2 2>&1 | tail -2 | tee "$out/refused.log"
