"""Cache keys of labelled sets: the same teacher gives the same digest in any process, and any change to
any weight gives another."""

import os
import subprocess
import sys

import torch

from hf_distill.fingerprints import weights_digest

DIGEST_IN_A_PROCESS = """
import sys, torch
from hf_distill.fingerprints import weights_digest
model = torch.nn.Module()
for name, value in torch.load(sys.argv[1]).items():
    model.register_buffer(name, value)
print(torch.get_num_threads(), weights_digest(model))
"""


def _digest_with_threads(path, threads: int) -> str:
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    out = subprocess.run([sys.executable, "-c", DIGEST_IN_A_PROCESS, str(path)], env=env, check=True,
                         capture_output=True, text=True).stdout.split()
    assert out[0] == str(threads)
    return out[1]


def test_the_digest_does_not_depend_on_the_thread_count(tmp_path):
    """Float sums differ with the number of threads that reduce them: a digest built on them made a teacher
    miss its own labelled cache in a process with another OMP_NUM_THREADS."""
    generator = torch.Generator().manual_seed(0)
    weights = {"embeddings": torch.randn(30522, 96, generator=generator), "dense": torch.randn(1536, 384, generator=generator)}
    path = tmp_path / "weights.pt"
    torch.save(weights, path)
    assert _digest_with_threads(path, 1) == _digest_with_threads(path, 2)


def test_any_changed_value_changes_the_digest():
    tensor = torch.zeros(1000, 257)
    before = weights_digest(tensor)
    for index in (0, 1, 128_456, tensor.numel() - 1):  # sampled or not, anywhere in the tensor
        changed = tensor.clone().view(-1)
        changed[index] = 1e-7
        assert weights_digest(changed.view(1000, 257)) != before
    assert weights_digest(tensor.double()) != before  # the dtype counts
    assert weights_digest(tensor.view(257, 1000)) != before  # and the shape


def test_the_digest_of_a_module_covers_its_parameter_names():
    first, second = torch.nn.Linear(3, 3), torch.nn.Linear(3, 3)
    second.load_state_dict(first.state_dict())
    assert weights_digest(first) == weights_digest(second)
    renamed = torch.nn.Sequential(first)
    assert weights_digest(renamed) != weights_digest(first)
