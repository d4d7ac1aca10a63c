"""The `tenant-platform` console script.

tenant-platform dev     start a local control plane, seed a realistic cluster, apply the
                        sample, run the operator in-process and show the status
                        (--no-operator: the cluster only, to run `tenant-platform run` against)
tenant-platform run     run the operator against the current kubeconfig
tenant-platform render  print every manifest the operator would apply for a TenantPlatform
tenant-platform facts   print the install values document of a live TenantPlatform
tenant-platform check   read-only preflight of the current cluster for a TenantPlatform
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from tenant_platform import __version__
from tenant_platform.api import constants


def repo_root() -> Path:
    """The source checkout this package runs from (for crds/, deploy/ and hack/)."""
    return Path(__file__).resolve().parents[2]


def crd_path() -> Path:
    return repo_root() / "crds" / "tenancy.dev_tenantplatforms.yaml"


def sample_path() -> Path:
    return repo_root() / "deploy" / "samples" / "tenantplatform.yaml"


def load_documents(path: str | Path) -> list[dict[str, Any]]:
    text = sys.stdin.read() if str(path) == "-" else Path(path).read_text(encoding="utf-8")
    return [d for d in yaml.safe_load_all(text) if d]


def _platforms(path: str | Path) -> list[dict[str, Any]]:
    docs = [d for d in load_documents(path) if d.get("kind") == constants.KIND]
    if not docs:
        raise SystemExit(f"{path}: no {constants.KIND} document found")
    return docs


def render_manifests(body: dict[str, Any]) -> list[dict[str, Any]]:
    """Every manifest the operator would apply for one TenantPlatform body, in apply order.

    Raises pydantic.ValidationError for an invalid spec. tests/golden/ pins the output.
    """
    from tenant_platform.api.models import TenantPlatform  # noqa: PLC0415
    from tenant_platform.reconcile import registry  # noqa: PLC0415

    body.setdefault("metadata", {}).setdefault("uid", "")
    platform = TenantPlatform.from_body(body)
    return [manifest for step in (*registry.STEPS, registry.HANDOFF) for manifest in step.render(platform)]


def dump_manifests(manifests: Sequence[dict[str, Any]]) -> str:
    """The YAML stream `tenant-platform render` prints (block style for multi-line strings)."""
    return yaml.dump_all(manifests, Dumper=_BlockDumper, sort_keys=False, default_flow_style=False)


def cmd_render(args: argparse.Namespace) -> int:
    import pydantic  # noqa: PLC0415

    from tenant_platform.reconcile import invalid_spec_message  # noqa: PLC0415

    out: list[dict[str, Any]] = []
    for body in _platforms(args.file):
        try:
            out.extend(render_manifests(body))
        except pydantic.ValidationError as exc:
            print(f"{body['metadata'].get('name')}: {invalid_spec_message(exc)}", file=sys.stderr)
            return 2
    sys.stdout.write(dump_manifests(out))
    return 0


class _BlockDumper(yaml.SafeDumper):
    """Multi-line strings (CEL, Corefile blocks, PEM) as literal blocks, readable in a review."""


def _str_representer(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    if "\n" in data:
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", data)


_BlockDumper.add_representer(str, _str_representer)


def cmd_run(args: argparse.Namespace) -> int:
    import dataclasses  # noqa: PLC0415

    from tenant_platform import logs  # noqa: PLC0415
    from tenant_platform import main as operator_main  # noqa: PLC0415
    from tenant_platform.config import load_settings  # noqa: PLC0415

    # The environment (the Helm chart, kustomize) first, then the command line's flags.
    settings = load_settings()
    overrides = {"kubeconfig": args.kubeconfig, "drift_interval": args.drift_interval, "log_format": args.log_format}
    settings = dataclasses.replace(settings, **{k: v for k, v in overrides.items() if v})
    logs.configure_logging(settings.log_format)
    return operator_main.run(
        settings,
        health_port=settings.health_port if args.probes else None,
        metrics_port=settings.metrics_port if args.metrics else None,
    )


def cmd_dev(args: argparse.Namespace) -> int:
    from tenant_platform import devmode  # noqa: PLC0415

    return devmode.main(
        files=args.file or [str(sample_path())],
        once=args.once,
        output=args.output,
        kubeconfig_out=args.kubeconfig,
        timeout=args.timeout,
        operator=args.operator,
        tenant_clusters=args.tenant_clusters,
    )


def cmd_facts(args: argparse.Namespace) -> int:
    from tenant_platform import preflight  # noqa: PLC0415
    from tenant_platform.kube.client import Kube  # noqa: PLC0415

    kube = Kube.from_kubeconfig(args.kubeconfig)
    try:
        sys.stdout.write(preflight.facts_document(kube, args.name))
    except preflight.PreflightError as exc:
        print(f"tenant-platform facts: {exc}", file=sys.stderr)
        return 2
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from tenant_platform import preflight  # noqa: PLC0415
    from tenant_platform.kube.client import Kube  # noqa: PLC0415

    kube = Kube.from_kubeconfig(args.kubeconfig)
    if args.file:
        body = _platforms(args.file)[0]
    else:
        live = kube.get(constants.API_VERSION, constants.KIND, args.name)
        if live is None:
            print(f"TenantPlatform {args.name} not found; pass -f FILE to check a file", file=sys.stderr)
            return 2
        body = live
    try:
        rows, code = preflight.run_check(kube, body)
    except preflight.PreflightError as exc:
        print(f"tenant-platform check: {exc}", file=sys.stderr)
        return 2
    if args.output == "json":
        print(json.dumps(rows, indent=2))
    else:
        print(preflight.format_table(rows))
    return int(code)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tenant-platform", description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--version", action="version", version=__version__)
    sub = parser.add_subparsers(dest="command", required=True)

    dev = sub.add_parser("dev", help="local control plane + seeded cluster + sample + operator")
    dev.add_argument("--once", action="store_true", help="exit after Ready (0) or the timeout (1)")
    dev.add_argument("--output", choices=["table", "json"], default="table")
    dev.add_argument("--kubeconfig", help="write the admin kubeconfig here")
    dev.add_argument("-f", "--file", action="append", help="apply this TenantPlatform (repeatable)")
    dev.add_argument("--timeout", type=float, default=180.0, help="seconds to wait for Ready with --once")
    dev.add_argument(
        "--tenant-clusters",
        type=int,
        default=0,
        metavar="N",
        help="also start N tenant API servers sharing the embedded etcd, each prepared by its own "
        "TenantPlatform through a kubeconfig Secret (docs/fleet.md)",
    )
    dev.add_argument(
        "--no-operator",
        dest="operator",
        action="store_false",
        help="only the seeded cluster: run `tenant-platform run` against it yourself (printed)",
    )
    dev.set_defaults(func=cmd_dev)

    run = sub.add_parser("run", help="run the operator against the current kubeconfig")
    run.add_argument("--kubeconfig")
    run.add_argument("--drift-interval", type=float)
    run.add_argument("--log-format", choices=["plain", "json"])
    run.add_argument("--no-probes", dest="probes", action="store_false", help="no /healthz endpoint")
    run.add_argument("--no-metrics", dest="metrics", action="store_false", help="no /metrics endpoint")
    run.set_defaults(func=cmd_run)

    render = sub.add_parser("render", help="print every manifest the operator would apply")
    render.add_argument("-f", "--file", required=True, help="TenantPlatform YAML ('-' for stdin)")
    render.set_defaults(func=cmd_render)

    facts = sub.add_parser("facts", help="print the install values of a live TenantPlatform")
    facts.add_argument("name")
    facts.add_argument("--kubeconfig")
    facts.set_defaults(func=cmd_facts)

    check = sub.add_parser("check", help="read-only preflight; exit 1 when anything fails")
    check.add_argument("name", nargs="?")
    check.add_argument("-f", "--file")
    check.add_argument("--kubeconfig")
    check.add_argument("--output", choices=["table", "json"], default="table")
    check.set_defaults(func=cmd_check)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "check" and not (args.name or args.file):
        build_parser().error("check needs a TenantPlatform NAME or -f FILE")
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
