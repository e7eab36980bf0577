"""Rules of the older Neuron compiler (``neuronxcc.nki``) that Python does not have
(``backends/nki/tracer_rules.py``): a tensor bound inside a traced block may not be read
after it, a slice may not change size with a loop index, a subscript may not mix slices
with index expressions; and ``activation`` takes no scalar bias. Autocomp's recorded
LayerNorm search (ucb-bar/autocomp's visualizer sample run) has a candidate the toolchain
refused for each; these tests hold the rules to the compiler's documented examples, and to
patterns that compiled on hardware (a branch on a shape, an alias in a branch, a fixed-size
slice at a moving offset, an integer beside index expressions, ``np.float32(eps)``)."""

from __future__ import annotations

import numpy as np
import pytest

from nki_testlib import install, load_module, run_both_ways

from autocomp.backends.nki.validate import validate_file

OLD = ("import math\nimport numpy as np\nimport neuronxcc.nki as nki\nimport neuronxcc.nki.isa as nisa\n"
       "import neuronxcc.nki.language as nl\n")
NEW = "import numpy as np\nimport nki\nimport nki.isa as nisa\nimport nki.language as nl\n"


RULES = ("NKI scopes a tensor", "changes size with the loop", "mixes slices")


def rule_issues(body: str, header: str = OLD, kernel: str = "k") -> list[str]:
    return [i.message for i in validate_file(header + body, kernel) if any(r in i.message for r in RULES)]


BRANCH_BOUND = '''
@nki.jit
def k(a, b, c):
  for i in range(4):
    if i < 2:
      tmp = nl.load(a)
    else:
      tmp = nl.load(b)
    nl.store(c, tmp)
  return c
'''

BRANCH_FIXED = '''
@nki.jit
def k(a, b, c):
  for i in range(4):
    tmp = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    if i < 2:
      tmp[...] = nl.load(a)
    else:
      tmp[...] = nl.load(b)
    nl.store(c, tmp)
  return c
'''

LOOP_SHADOWED = '''
@nki.jit
def k(ptr):
  data = nl.zeros((128, 128), dtype=np.float32, buffer=nl.sbuf)
  for i in nl.sequential_range(4):
    data = data + 1.0
  nl.store(ptr, value=data)
  return ptr
'''

LOOP_UPDATED = '''
@nki.jit
def k(ptr):
  data = nl.zeros((128, 128), dtype=np.float32, buffer=nl.sbuf)
  for i in nl.sequential_range(4):
    data[...] = data + 1.0
  nl.store(ptr, value=data)
  return ptr
'''

# A branch on a shape is decided while tracing (plain Python): no scope. This is the form of
# the recorded search's fastest LayerNorm, which ran at 2.083 ms on a trn1.
SHAPE_BRANCH = '''
@nki.jit
def k(x, out):
  for i in nl.affine_range(2):
    t = nl.load(x[i * 128:(i + 1) * 128, :])
    if x.shape[1] % 512 != 0:
      r = nl.exp(t)
    else:
      r = nl.tanh(t)
    nl.store(out[i * 128:(i + 1) * 128, :], value=r)
  return out
'''

# The same with the branch on the loop index: the recorded search's refused candidate.
INDEX_BRANCH = SHAPE_BRANCH.replace("if x.shape[1] % 512 != 0:", "if i * 512 < 600:")

# An alias of a tensor made outside the block (AWS's contributed conv kernels).
ALIAS_IN_BRANCH = '''
@nki.jit
def k(x, out, flip):
  raw = nl.load(x)
  for i in nl.affine_range(1):
    if i < 1:
      use = nl.exp(raw)
    else:
      use = raw
  return out
'''

TAIL_SLICE = '''
@nki.jit
def k(x, out):
  t = nl.load(x)
  for j in nl.affine_range(3):
    start = j * 512
    end = min(start + 512, 1200)
    part = t[:, start:end]
    nl.store(out[:, start:end], value=nl.exp(part))
  return out
'''

FIXED_SLICES = '''
@nki.jit
def k(x, out):
  t = nl.load(x)
  for j in nl.affine_range(2):
    start = j * 512
    nl.store(out[:, j * 512:(j + 1) * 512], value=nl.exp(t[:, start:start + 512]))
    half = (j // 2) * 256
    nl.store(out[:, half:half + 256], value=t[:, half:half + 256])
  return out
'''


MIXED = '''
@nki.jit
def k(x, out):
  i_p = nl.arange(128)[:, None]
  t = nl.load(x[i_p, 0:512])
  nl.store(out, value=t)
  return out
'''

UNMIXED = '''
@nki.jit
def k(x, out):
  i_p = nl.arange(128)[:, None]
  i_f = nl.arange(512)[None, :]
  grid = nl.mgrid[0:128, 0:512]
  for b in nl.affine_range(2):
    t = nl.load(x[b, i_p, i_f])
    u = nl.load(x[b, grid.p, grid.x])
    v = nl.load(x[b, 0:128, 0:512])
    nl.store(out[b, i_p, b * 0 + i_f], value=nl.add(nl.add(t, u), v))
  return out
'''


def test_a_tensor_bound_in_a_traced_branch_cannot_be_read_after_it():
    (msg,) = rule_issues(BRANCH_BOUND)
    assert "`tmp` is a tensor bound inside the if/else block" in msg and "tmp[...] = ..." in msg
    assert rule_issues(BRANCH_FIXED) == []


def test_shadowing_a_tensor_inside_a_loop_cannot_be_read_after_it():
    (msg,) = rule_issues(LOOP_SHADOWED)
    assert "`data` is a tensor bound inside the for block" in msg
    assert rule_issues(LOOP_UPDATED) == []


def test_branches_decided_while_tracing_and_aliases_open_no_scope():
    assert rule_issues(SHAPE_BRANCH) == []
    assert rule_issues(ALIAS_IN_BRANCH) == []
    assert len(rule_issues(INDEX_BRANCH)) == 1


def test_a_slice_whose_size_moves_with_the_loop_index_is_refused():
    msgs = rule_issues(TAIL_SLICE)
    assert msgs and all("changes size with the loop index" in m for m in msgs)
    assert "mask" in msgs[0]
    assert rule_issues(FIXED_SLICES) == []


def test_a_subscript_cannot_mix_slices_with_index_expressions():
    (msg,) = rule_issues(MIXED)
    assert "`x[i_p, 0:512]` mixes slices with nl.arange/nl.mgrid index expressions" in msg
    assert rule_issues(UNMIXED) == []


def test_a_numpy_dtype_may_make_a_scalar_constant_but_not_an_array(tmp_path):
    ok = ("\n@nki.jit\ndef k(x):\n  out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)\n"
          "  t = nl.load(x)\n  nl.store(out, value=nl.add(t, np.float32(0.5)))\n  return out\n")
    assert validate_file(OLD + ok, "k") == []
    bad = ok.replace("np.float32(0.5)", "np.float32([1.0, 2.0])")
    assert any("computes on the host" in i.message for i in validate_file(OLD + bad, "k"))
    install()
    mod, path = load_module(tmp_path, "scalar", OLD + ok)
    x = np.random.default_rng(6).standard_normal((128, 64)).astype(np.float32)
    res = run_both_ways(path, mod, "k", [x])  # also through the kernel process
    np.testing.assert_allclose(res.outputs[0], x + 0.5, rtol=1e-6)


def test_the_rules_belong_to_the_older_api_only():
    # NKI 0.7+ (``import nki``) unrolls Python loops and resolves branches while tracing.
    assert rule_issues(BRANCH_BOUND, NEW) == []
    assert rule_issues(TAIL_SLICE, NEW) == []
    assert rule_issues(MIXED, NEW) == []


@pytest.mark.parametrize("header,call", [
    (OLD, "nisa.activation(op=nl.exp, data=t, bias=np.float32(1e-5))"),
    (NEW, "nisa.activation(dst=t, op=nl.exp, data=t, bias=1e-5)")])
def test_activation_refuses_a_scalar_bias(header, call, tmp_path):
    """``err_activation_bias_invalid_type``: the recorded search's two LayerNorms that passed
    ``bias=np.float32(epsilon)`` did not compile."""
    install()
    mod, path = load_module(tmp_path, "bias", header + f'''
@nki.jit
def k(x):
  out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
  t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
  nisa.dma_copy(dst=t, src=x)
  r = {call}
  nisa.dma_copy(dst=out, src=t)
  return out
''')
    from autocomp.backends.nki.interp.errors import NkiError
    from autocomp.backends.nki.interp.install import execute

    with pytest.raises(NkiError, match="bias must be a vector tile"):
        execute(mod.k, [np.zeros((128, 64), np.float32)], kernel_file=path)


def test_bn_stats_masks_its_input(tmp_path):
    """The mask of ``nisa.bn_stats`` selects the data elements it reads (shaped like the
    data, not like its 6-value result): the recorded search's LayerNorms that ran on
    hardware mask their last 512-column chunk this way."""
    install()
    mod, path = load_module(tmp_path, "bn_mask", OLD + '''
@nki.jit
def k(x):
  out = nl.ndarray((128, 2), dtype=nl.float32, buffer=nl.shared_hbm)
  t = nl.load(x)
  i_f = nl.arange(512)[None, :]
  stats = nisa.bn_stats(t, dtype=nl.float32, mask=(i_f < 300))
  nl.store(out, value=nisa.bn_aggr(stats, dtype=nl.float32))
  return out
''')
    from autocomp.backends.nki.interp.install import execute

    x = np.random.default_rng(5).standard_normal((128, 512)).astype(np.float32)
    res = execute(mod.k, [x], kernel_file=path)
    np.testing.assert_allclose(res.outputs[0][:, 0], x[:, :300].mean(axis=1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(res.outputs[0][:, 1], x[:, :300].var(axis=1), rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("body,says", [(BRANCH_BOUND, "`tmp` is a tensor bound inside the if/else block"),
                                       (TAIL_SLICE, "changes size with the loop index")])
def test_autocomp_eval_refuses_such_a_kernel_before_it_runs(body, says, tmp_path):
    """Through the evaluator a user runs: rejected, with the line and the compiler's fix."""
    import subprocess
    import sys

    path = tmp_path / "kernel.py"
    shapes = "[np.ones((128, 1200), np.float32), np.zeros((128, 1200), np.float32)]" if body is TAIL_SLICE else \
        "[np.ones((128, 64), np.float32), np.ones((128, 64), np.float32), np.zeros((128, 64), np.float32)]"
    path.write_text(OLD + body + f"\n\ndef get_inputs(rng):\n    return {shapes}\n")
    out = subprocess.run([sys.executable, "-m", "autocomp", "eval", str(path)], capture_output=True, text=True,
                         timeout=300)
    text = out.stdout + out.stderr
    assert "rejected" in text and says in text, text
