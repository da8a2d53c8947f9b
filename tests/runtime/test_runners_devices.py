"""Thread ranks' devices: never two ranks on one GPU (their backward passes share its one autograd thread)."""

import pytest
import torch

from workbench._validation import ParamError
from workbench.runtime import launch
from workbench.runtime.runners import inprocess_devices


def test_auto_takes_a_gpu_per_rank_or_the_cpu():
    assert inprocess_devices("auto", 1, gpus=1) == [torch.device("cuda", 0)]
    assert inprocess_devices("auto", 2, gpus=1) == [torch.device("cpu")] * 2
    assert inprocess_devices("auto", 2, gpus=4) == [torch.device("cuda", 0), torch.device("cuda", 1)]
    assert inprocess_devices("cpu", 3, gpus=4) == [torch.device("cpu")] * 3
    assert inprocess_devices("auto", 1, gpus=0) == [torch.device("cpu")]


def test_cuda_with_fewer_gpus_than_thread_ranks_is_refused():
    with pytest.raises(ParamError, match=r"The 'device' parameter of the in-process runners .* share 1 GPU"):
        inprocess_devices("cuda", 2, gpus=1)
    with pytest.raises(ParamError, match="sees no GPU"):
        inprocess_devices("cuda", 1, gpus=0)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without a GPU")
def test_launch_refuses_cuda_before_anything_starts(tmp_path):
    from recipes.full_graph import recipe

    with pytest.raises(ParamError, match="'device'"):
        launch(recipe(graph="karate", epochs=1), runner="local", workers=2, device="cuda", out=tmp_path)
    assert not list(tmp_path.iterdir())      # no run log: refused before the run started


def test_dask_refuses_cuda_where_a_rank_has_no_gpu_of_its_own():
    from workbench.runtime.runners import check_embedded_device, pick_backend

    assert pick_backend([{"gpu": "a/0"}, {"gpu": "b/0"}], "cuda") == ("nccl", "cuda:0")   # a GPU per rank: NCCL
    assert pick_backend([{"gpu": "a/0"}, {"gpu": "a/0"}], "auto") == ("gloo", "cpu")
    assert pick_backend([{"gpu": None}], "cpu") == ("gloo", "cpu")
    with pytest.raises(ParamError, match=r"The 'device' parameter of the Dask runner must be 'cpu' or 'auto' where the "
                                         r"workers of the 2 rank\(s\) see no GPU\. Got 'cuda' instead\."):
        pick_backend([{"gpu": None}, {"gpu": None}], "cuda")
    with pytest.raises(ParamError, match=r"'device' parameter of the Dask runner .*\(2 of 2 rank\(s\) see a GPU, "
                                         r"1 distinct"):
        pick_backend([{"gpu": "a/0"}, {"gpu": "a/0"}], "cuda")
    check_embedded_device("cuda", 1, gpus=1)
    check_embedded_device("auto", 4, gpus=0)
    with pytest.raises(ParamError, match="embedded LocalCluster's 2 workers share"):
        check_embedded_device("cuda", 2, gpus=2)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without a GPU")
def test_launch_refuses_cuda_on_the_embedded_dask_cluster_before_anything_starts(tmp_path):
    from recipes.full_graph import recipe

    with pytest.raises(ParamError, match=r"The 'device' parameter of the Dask runner must be 'cpu' or 'auto' where the "
                                         r"embedded LocalCluster's workers \(on this machine\) see no GPU\. "
                                         r"Got 'cuda'"):
        launch(recipe(graph="karate", epochs=1), runner="dask", workers=2, device="cuda", out=tmp_path)
    assert not list(tmp_path.iterdir())      # no run log, no cluster: refused before the run started
