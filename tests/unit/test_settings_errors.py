"""A setting the operator cannot use is bad input: it names the variable and the expected form,
and the CLI exits 2 with it in one line (issue 25). The environment is read by pydantic-settings
(config.EnvironmentSettings); every setting that can be wrong has a wrong value below."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tenant_platform import logs
from tenant_platform.cli_errors import Exit
from tenant_platform.config import EnvironmentSettings, Settings, SettingsError, load_settings

ROOT = Path(__file__).resolve().parents[2]


# One wrong value (at least) per setting that can be wrong: (variable, value, expected form).
WRONG_VALUES = [
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
    ("TENANT_PLATFORM_STUCK_PASS_SECONDS", "1e400", "a number of seconds greater than 0, e.g. 600"),
    ("TENANT_PLATFORM_RETRY_PERIOD", "2s", "a number of seconds greater than 0, e.g. 2"),
    ("TENANT_PLATFORM_RENEW_DEADLINE", "-10", "a number of seconds greater than 0, e.g. 10"),
    ("TENANT_PLATFORM_LEASE_DURATION", "inf", "a number of seconds greater than 0, e.g. 15"),
    ("TENANT_PLATFORM_KOPF_WORKERS", "2000", "a whole number from 1 to 1024, e.g. 16"),
    ("TENANT_PLATFORM_RECONCILE_WORKERS", "eight", "a whole number from 1 to 1024, e.g. 8"),
    ("TENANT_PLATFORM_HEALTH_PORT", "-1", "a whole number from 0 to 65535 (0: any free port), e.g. 8081"),
    ("TENANT_PLATFORM_CACHE", "", "true or false"),
    ("TENANT_PLATFORM_LOG_FORMAT", "", "one of plain, json"),
    ("TENANT_PLATFORM_LOG_LEVEL", "trace", "one of debug, info, warning, error"),
]


@pytest.mark.parametrize(("variable", "value", "expected"), WRONG_VALUES)
def test_a_wrong_value_names_the_variable_and_the_expected_form(variable: str, value: str, expected: str) -> None:
    with pytest.raises(SettingsError) as raised:
        load_settings({variable: value})
    assert raised.value.variable == variable
    assert str(raised.value).startswith(f"{variable}={value!r}: expected {expected}")


# Settings whose every value is usable (free text, or a list of names where empty means none).
ANY_VALUE = {
    "TENANT_PLATFORM_NAMESPACE",
    "KUBECONFIG",
    "TENANT_PLATFORM_KUBE_CONTEXT",
    "KUBERNETES_SERVICE_HOST",
    "TENANT_PLATFORM_PROTECTED_NAMESPACES",
    "TENANT_PLATFORM_IDENTITY",
    "TENANT_PLATFORM_CACHE_MESH_NAMESPACE",
    "TENANT_PLATFORM_CACHE_HAMI_NAMESPACES",
}


def variables() -> set[str]:
    return {str(info.validation_alias) for info in EnvironmentSettings.model_fields.values()}


def test_every_setting_that_can_be_wrong_has_a_wrong_value_above() -> None:
    covered = {variable for variable, _, _ in WRONG_VALUES}
    assert covered == variables() - ANY_VALUE
    assert variables() >= ANY_VALUE


def test_the_variables_and_defaults_are_the_documented_ones() -> None:
    # The names the chart, the kustomize base and docs/configuration use; the defaults of Settings.
    assert variables() == ANY_VALUE | {
        f"TENANT_PLATFORM_{name}"
        for name in (
            "DRIFT_INTERVAL",
            "KOPF_WORKERS",
            "RECONCILE_WORKERS",
            "GPU_DEBOUNCE",
            "LOG_FORMAT",
            "LOG_LEVEL",
            "METRICS_PORT",
            "HEALTH_PORT",
            "RETRY_PERIOD",
            "RENEW_DEADLINE",
            "LEASE_DURATION",
            "STUCK_PASS_SECONDS",
            "CACHE",
            "WEBHOOK_PROBE_INTERVAL",
        )
    }
    assert load_settings({}) == Settings()


def test_only_the_given_mapping_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TENANT_PLATFORM_DRIFT_INTERVAL", "5m")
    assert load_settings({}).drift_interval == 300.0
    with pytest.raises(SettingsError, match="TENANT_PLATFORM_DRIFT_INTERVAL='5m'"):
        load_settings()  # the process's environment


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
        ({"TENANT_PLATFORM_LOG_FORMAT": " JSON"}, "log_format", "json"),
        ({"TENANT_PLATFORM_KOPF_WORKERS": "1024"}, "kopf_workers", 1024),
        ({"TENANT_PLATFORM_NAMESPACE": "ops"}, "operator_namespace", "ops"),
        ({"KUBECONFIG": ""}, "kubeconfig", None),
        ({"KUBECONFIG": "/etc/kube/config"}, "kubeconfig", "/etc/kube/config"),
        ({"KUBERNETES_SERVICE_HOST": "10.0.0.1"}, "in_cluster", True),
        ({}, "in_cluster", False),
        ({"TENANT_PLATFORM_KUBE_CONTEXT": "prod"}, "kube_context", "prod"),
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
