"""The shared test server dying during a test fails that test; the tests after it get a fresh one.

A session of its own (pytester, in a subprocess) runs the suite's own plugin
(``support.shared_server``) on a one-model repository and kills the real server mid-test.
"""

from __future__ import annotations

import pytest

from support.paths import ROOT

pytest_plugins = ["pytester"]

ECHO_MODEL = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        inputs = [pb_utils.get_input_tensor_by_name(r, "x").as_numpy() for r in requests]
        return [pb_utils.InferenceResponse([pb_utils.Tensor("y", x)]) for x in inputs]
"""

ECHO_CONFIG = """
backend: "python"
input [{ name: "x" data_type: TYPE_FP32 dims: [1] }]
output [{ name: "y" data_type: TYPE_FP32 dims: [1] }]
instance_group [{ kind: KIND_CPU }]
"""

INNER_CONFTEST = f"""
import pytest

pytest_plugins = ["support.shared_server"]


@pytest.fixture(scope="session")
def served_repository(tmp_path_factory):
    repo = tmp_path_factory.mktemp("served") / "repo"
    (repo / "echo" / "1").mkdir(parents=True)
    (repo / "echo" / "1" / "model.py").write_text({ECHO_MODEL!r})
    (repo / "echo" / "config.pbtxt").write_text({ECHO_CONFIG!r})
    return repo
"""

INNER_TESTS = """
import os
import signal
import time

import pytest

from support.shared_server import WATCH


def _kill(server):
    os.killpg(server.pid, signal.SIGKILL)
    while server.is_running():
        time.sleep(0.05)


def test_a_kills_it(triton_server):
    _kill(triton_server)


def test_b_gets_a_fresh_one(triton_server):
    assert triton_server.ready_models() == ["echo"]


def test_c_without_the_server_kills_it(request):
    _kill(request.config.stash[WATCH].server)


def test_d_gets_a_fresh_one(triton_server):
    assert triton_server.ready_models() == ["echo"]


def test_e_kills_it_and_fails_on_its_own(triton_server):
    _kill(triton_server)
    assert False, "the test's own failure"


def test_f_gets_a_fresh_one_again(triton_server):
    assert triton_server.ready_models() == ["echo"]


@pytest.fixture
def killed_afterwards(triton_server):
    yield
    _kill(triton_server)


def test_g_kills_it_in_its_teardown(killed_afterwards):
    pass


def test_h_gets_a_fresh_one_at_last(triton_server):
    assert triton_server.ready_models() == ["echo"]
"""


def test_a_test_during_which_the_shared_server_dies_fails(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONPATH", str(ROOT / "tests"))
    pytester.makeconftest(INNER_CONFTEST)
    pytester.makepyfile(test_inner=INNER_TESTS)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-v")
    result.assert_outcomes(passed=5, failed=3, errors=1)
    for test in (
        "test_b_gets_a_fresh_one",
        "test_d_gets_a_fresh_one",
        "test_f_gets_a_fresh_one_again",
        "test_g_kills_it_in_its_teardown",
        "test_h_gets_a_fresh_one_at_last",
    ):
        result.stdout.fnmatch_lines([f"*::{test} PASSED*"])
    output = result.stdout.str()
    died = "the shared Triton server died during the {} of test_inner.py::{} (exit status -9, SIGKILL)"
    for test in (
        "test_a_kills_it",
        "test_c_without_the_server_kills_it",
        "test_e_kills_it_and_fails_on_its_own",
    ):
        assert died.format("call", test) in output
    assert died.format("teardown", "test_g_kills_it_in_its_teardown") in output
    assert "the test's own failure" in output  # kept beside the death, not replaced by it
    assert "its log (" in output and "tritonserver.log) ends:" in output
    assert "Started HTTPService" in output  # the server's own lines, from the end of its log
