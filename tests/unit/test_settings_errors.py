"""A setting the operator cannot use is bad input: it names the variable and the expected form,
and the CLI exits 2 with it in one line (issue: a release an admin can install)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tenant_platform import logs
from tenant_platform.cli_errors import Exit
from tenant_platform.config import SettingsError, load_settings

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("variable", "value", "expected"),
    [
        ("TENANT_PLATFORM_DRIFT_INTERVAL", "5m", "a number of seconds greater than 0, e.g. 300"),
        ("TENANT_PLATFORM_DRIFT_INTERVAL", "0", "a number of seconds greater than 0"),
        ("TENANT_PLATFORM_DRIFT_INTERVAL", "nan", "a number of seconds"),
        ("TENANT_PLATFORM_GPU_DEBOUNCE", "-1", "a number of seconds (0 or more), e.g. 5"),
        ("TENANT_PLATFORM_WEBHOOK_PROBE_INTERVAL", "ten", "a number of seconds (0 or more)"),
        ("TENANT_PLATFORM_RECONCILE_WORKERS", "0", "a whole number from 1 to 1024, e.g. 8"),
        ("TENANT_PLATFORM_KOPF_WORKERS", "2.5", "a whole number from 1 to 1024"),
        ("TENANT_PLATFORM_METRICS_PORT", "70000", "a whole number from 0 to 65535 (0: any free port), e.g. 8080"),
        ("TENANT_PLATFORM_HEALTH_PORT", "http", "a whole number from 0 to 65535"),
        ("TENANT_PLATFORM_CACHE", "maybe", "true or false"),
        ("TENANT_PLATFORM_LOG_FORMAT", "xml", "one of plain, json"),
        ("TENANT_PLATFORM_LOG_LEVEL", "verbose", "one of debug, info, warning, error"),
        ("TENANT_PLATFORM_STUCK_PASS_SECONDS", "", "a number of seconds greater than 0"),
    ],
)
def test_a_wrong_value_names_the_variable_and_the_expected_form(variable: str, value: str, expected: str) -> None:
    with pytest.raises(SettingsError) as raised:
        load_settings({variable: value})
    assert raised.value.variable == variable
    assert str(raised.value).startswith(f"{variable}={value!r}: expected {expected}")


def test_inconsistent_election_timings_name_all_three() -> None:
    with pytest.raises(SettingsError, match="retry period < renew deadline < lease duration"):
        load_settings({"TENANT_PLATFORM_RENEW_DEADLINE": "20"})  # past the default lease duration (15)


@pytest.mark.parametrize(
    ("environ", "field", "value"),
    [
        ({}, "drift_interval", 300.0),
        ({"TENANT_PLATFORM_DRIFT_INTERVAL": " 60 "}, "drift_interval", 60.0),
        ({"TENANT_PLATFORM_GPU_DEBOUNCE": "0"}, "gpu_debounce", 0.0),
        ({"TENANT_PLATFORM_CACHE": "No"}, "cache", False),
        ({"TENANT_PLATFORM_CACHE": "on"}, "cache", True),
        ({"TENANT_PLATFORM_CACHE": "/home/me/.cache/tenant-platform"}, "cache", True),  # the build scripts' cache
        ({"TENANT_PLATFORM_LOG_LEVEL": "WARNING"}, "log_level", "warning"),
        ({}, "log_level", "info"),
        ({"TENANT_PLATFORM_METRICS_PORT": "0"}, "metrics_port", 0),
        ({"TENANT_PLATFORM_PROTECTED_NAMESPACES": ""}, "protected_namespaces", ()),
        (
            {"TENANT_PLATFORM_CACHE_HAMI_NAMESPACES": "kube-system, hami"},
            "cache_hami_namespaces",
            ("kube-system", "hami"),
        ),
    ],
)
def test_good_values_are_read(environ: dict[str, str], field: str, value: object) -> None:
    assert getattr(load_settings(environ), field) == value


def test_the_cli_exits_2_with_one_line_naming_the_setting(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")}
    env.update(HOME=str(tmp_path), PYTHONPATH=str(ROOT / "operator"), TENANT_PLATFORM_DRIFT_INTERVAL="5m")
    done = subprocess.run(
        [sys.executable, "-m", "tenant_platform.cli", "run"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == Exit.BAD_INPUT, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "TENANT_PLATFORM_DRIFT_INTERVAL='5m': expected a number of seconds" in lines[0]
    assert "internal error" not in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("level", "expected"), [("warning", logging.WARNING), ("debug", logging.DEBUG), ("info", logging.INFO)]
)
def test_the_log_level_is_the_root_level(level: str, expected: int) -> None:
    root = logging.getLogger()
    before = (root.level, list(root.handlers))
    try:
        logs.configure_logging("plain", level=level)
        assert root.level == expected
    finally:
        root.setLevel(before[0])
        root.handlers[:] = before[1]
