"""The `tenant-platform` console script.

tenant-platform dev     start a local control plane, seed a realistic cluster, apply the
                        sample, run the operator in-process and show the status
                        (--no-operator: the cluster only, to run `tenant-platform run` against)
tenant-platform run     run the operator against the current kubeconfig
tenant-platform render  print every manifest the operator would apply for a TenantPlatform
tenant-platform facts   print the install values document of a live TenantPlatform
tenant-platform check   read-only preflight of the current cluster for a TenantPlatform
tenant-platform fit     which GPU nodes could take a pod asking for this much GPU now, and why not
tenant-platform diagnose  one redacted archive of what support asks first
tenant-platform version this command's version and, when a cluster is reachable, the operator's
tenant-platform completion bash|zsh   a shell completion script

Exit codes (cli_errors.Exit, docs/cli.md): 0 OK, 1 a failed check, 2 bad input or usage,
3 cannot reach or authenticate to the cluster, 4 internal error. Errors are one line on stderr.
"""

from __future__ import annotations

import argparse
import importlib.resources
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from tenant_platform import __version__
from tenant_platform.api import constants
from tenant_platform.cli_errors import CliError, Exit, admit, connect, guard, platforms_in, say
from tenant_platform.config import LOG_FORMATS, LOG_LEVELS


def repo_root() -> Path:
    """The source checkout this package runs from (for crds/, deploy/ and hack/)."""
    return Path(__file__).resolve().parents[2]


def data_path(*parts: str) -> Path:
    """A file the package ships (package data), installed from a wheel or not. The copies of the
    repository's files under data/ are kept equal by hack/sync-deploy.py."""
    return Path(str(importlib.resources.files("tenant_platform").joinpath("data", *parts)))


def crd_path() -> Path:
    """The TenantPlatform CRD (a copy of crds/tenancy.dev_tenantplatforms.yaml)."""
    return data_path("crds", "tenancy.dev_tenantplatforms.yaml")


def sample_path() -> Path:
    """The sample TenantPlatform `dev` applies (a copy of deploy/samples/tenantplatform.yaml)."""
    return data_path("samples", "tenantplatform.yaml")


def load_documents(path: str | Path) -> list[dict[str, Any]]:
    text = sys.stdin.read() if str(path) == "-" else Path(path).read_text(encoding="utf-8")
    return [d for d in yaml.safe_load_all(text) if d]


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
    out: list[dict[str, Any]] = []
    source = "stdin" if args.file == "-" else args.file
    for body in platforms_in(args.file):
        admit(body, source)  # refused exactly where the API server would refuse it
        out.extend(render_manifests(body))
    if args.output == "json":
        print(json.dumps({"apiVersion": "v1", "kind": "List", "items": out}, indent=2))
    else:
        sys.stdout.write(dump_manifests(out))
    return Exit.OK


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
    from tenant_platform.config import load_settings  # noqa: PLC0415
    from tenant_platform.main import run  # noqa: PLC0415

    # The environment (the Helm chart, kustomize) first, then the command line's flags.
    settings = load_settings()
    overrides = {
        "kubeconfig": args.kubeconfig,
        "kube_context": args.context,
        "drift_interval": args.drift_interval,
        "log_format": args.log_format,
        "log_level": args.log_level,
    }
    settings = dataclasses.replace(settings, **{k: v for k, v in overrides.items() if v})
    # Fail fast, in one line, when there is no cluster to talk to (kopf would retry for ever).
    connect(settings.kubeconfig, settings.kube_context)
    logs.configure_logging(settings.log_format, level=settings.log_level)
    return run(
        settings,
        health_port=settings.health_port if args.probes else None,
        metrics_port=settings.metrics_port if args.metrics else None,
    )


def cmd_dev(args: argparse.Namespace) -> int:
    from tenant_platform import devmode  # noqa: PLC0415

    files = args.file or [str(sample_path())]
    for path in files:  # before minutes of control-plane start-up, not after
        for body in platforms_in(path):
            admit(body, path)
    from tenant_platform.testing.binaries import ControlPlaneError  # noqa: PLC0415

    try:
        return devmode.main(
            files=files,
            once=args.once,
            output=args.output,
            kubeconfig_out=args.kubeconfig,
            timeout=args.timeout,
            operator=args.operator,
            tenant_clusters=args.tenant_clusters,
        )
    except ControlPlaneError as exc:
        first, *rest = str(exc).splitlines() or [""]
        raise CliError(
            f"the local control plane did not build or start: {first} (docs/control-plane.md)",
            Exit.CLUSTER,
            details=rest[-20:],
        ) from None


OPERATOR_NAMESPACE = "tenant-platform-system"
OPERATOR_LABEL = "app.kubernetes.io/name=tenant-platform-operator"


def image_version(image: str) -> str | None:
    """The tag of an image reference (``registry:5000/x/y:0.2.0@sha256:...`` -> ``0.2.0``), or None."""
    name = image.partition("@")[0]
    last = name.rpartition("/")[2]
    return last.rpartition(":")[2] if ":" in last else None


def operator_version(deployment: dict[str, Any]) -> dict[str, Any]:
    """What a cluster says about the operator it runs: the image tag of the operator Deployment
    (the chart's ``app.kubernetes.io/version`` label when the image is pinned by digest only)."""
    meta = deployment.get("metadata", {})
    containers = deployment.get("spec", {}).get("template", {}).get("spec", {}).get("containers") or [{}]
    container = next((c for c in containers if c.get("name") == "operator"), containers[0])
    image = str(container.get("image", ""))
    version = image_version(image) or (meta.get("labels") or {}).get("app.kubernetes.io/version") or "unknown"
    status = deployment.get("status", {})
    return {
        "version": version,
        "image": image,
        "deployment": f"{meta.get('namespace')}/{meta.get('name')}",
        "ready": f"{status.get('readyReplicas', 0)}/{deployment.get('spec', {}).get('replicas', 1)}",
    }


def cluster_versions(kubeconfig: str | None, context: str | None, namespace: str) -> dict[str, Any]:
    """The server's and the operator's version; never raises: what cannot be read says why."""
    from tenant_platform.kube.errors import KubeError  # noqa: PLC0415

    try:
        kube = connect(kubeconfig, context)
    except CliError as exc:
        return {"reachable": False, "error": exc.message}
    out: dict[str, Any] = {"reachable": True, "server": kube.server_version()[2]}
    try:
        found = kube.list("apps/v1", "Deployment", namespace, label_selector=OPERATOR_LABEL)
    except KubeError as exc:
        out["operator"] = {"error": f"cannot list Deployments in namespace {namespace}: {exc}"}
        return out
    if not found:
        out["operator"] = {"error": f"no operator Deployment ({OPERATOR_LABEL}) in namespace {namespace}"}
    else:
        out["operator"] = operator_version(sorted(found, key=lambda d: d["metadata"]["name"])[0])
    return out


def cmd_version(args: argparse.Namespace) -> int:
    report: dict[str, Any] = {"client": {"version": __version__}}
    if not args.client:
        report["cluster"] = cluster_versions(args.kubeconfig, args.context, args.namespace)
    if args.output == "json":
        print(json.dumps(report, indent=2))
        return Exit.OK
    if args.output == "yaml":
        sys.stdout.write(yaml.safe_dump(report, sort_keys=False))
        return Exit.OK
    print(f"client:   {__version__}")
    cluster = report.get("cluster")
    if cluster is None:
        return Exit.OK
    if not cluster["reachable"]:
        print(f"operator: not reachable ({cluster['error']})")
        return Exit.OK
    print(f"server:   {cluster['server']}")
    operator = cluster["operator"]
    if "error" in operator:
        print(f"operator: not found ({operator['error']})")
    else:
        print(
            f"operator: {operator['version']} (image {operator['image']}, deployment {operator['deployment']}, "
            f"{operator['ready']} ready)"
        )
    return Exit.OK


def cmd_completion(args: argparse.Namespace) -> int:
    from tenant_platform import completion  # noqa: PLC0415

    sys.stdout.write(completion.script(build_parser(), args.shell))
    return Exit.OK


def cmd_facts(args: argparse.Namespace) -> int:
    from tenant_platform import preflight  # noqa: PLC0415

    kube = connect(args.kubeconfig, args.context)
    try:
        document = preflight.facts_document(kube, args.name)
    except preflight.PreflightError as exc:
        raise CliError(str(exc)) from None
    if args.output == "json":
        print(json.dumps(yaml.safe_load(document), indent=2))
    else:
        sys.stdout.write(document)
    return Exit.OK


def cmd_check(args: argparse.Namespace) -> int:
    from tenant_platform import preflight  # noqa: PLC0415

    body: dict[str, Any]
    if args.file:
        body = platforms_in(args.file)[0]
        admit(body, args.file)
    kube = connect(args.kubeconfig, args.context)
    if not args.file:
        live = kube.get(constants.API_VERSION, constants.KIND, args.name)
        if live is None:
            raise CliError(
                f"{constants.KIND} {args.name} not found on the cluster (kubectl get tp lists them); "
                "pass -f FILE to check a file instead."
            )
        body = live
    try:
        rows, code = preflight.run_check(kube, body)
    except preflight.PreflightError as exc:
        raise CliError(str(exc)) from None
    if args.output == "json":
        print(json.dumps(rows, indent=2))
    elif args.output == "yaml":
        sys.stdout.write(yaml.safe_dump(rows, sort_keys=False))
    else:
        print(preflight.format_table(rows))
    return Exit.FAILED if code else Exit.OK


def cmd_fit(args: argparse.Namespace) -> int:
    from tenant_platform import fitcli  # noqa: PLC0415

    asked = (args.memory, args.cores, args.cards) != (None, None, None)
    try:
        if args.snapshot:
            inputs = fitcli.load_snapshot(args.snapshot)
        else:
            kube = connect(args.kubeconfig, args.context)
            inputs = fitcli.read_cluster(kube, hami_namespace=args.hami_namespace, platform=args.platform)
        if args.save_snapshot:
            fitcli.save_snapshot(inputs, args.save_snapshot)
            say("fit", f"saved {args.save_snapshot}: {fitcli.summary(inputs.nodes, inputs.pods, inputs.platforms)}")
            if not asked:
                return Exit.OK
        request = fitcli.request_of(args.cards, args.memory, args.cores)
        report = fitcli.evaluate(
            inputs, request, memory_given=args.memory is not None, platform=args.platform, namespace=args.namespace
        )
    except fitcli.FitError as exc:
        raise CliError(str(exc)) from None
    if args.output == "json":
        print(json.dumps(fitcli.to_json(report), indent=2))
    else:
        print(fitcli.format_text(report))
    return Exit.OK if report.fitting else Exit.FAILED


def cmd_diagnose(args: argparse.Namespace) -> int:
    from tenant_platform import diagnose  # noqa: PLC0415

    kube = connect(args.kubeconfig, args.context)
    path = args.output or diagnose.default_name()
    result = diagnose.collect(kube, operator_namespace=args.namespace, progress=lambda line: say("diagnose", line))
    diagnose.write_archive(result, path)
    say("diagnose", f"wrote {path} ({len(result.files)} files; {len(result.missing)} reads missing, see MISSING.txt)")
    return Exit.OK


def _non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text} is negative")
    return value


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not at least 1")
    return value


def _cluster_flags(parser: argparse.ArgumentParser, *, context: bool = True) -> None:
    parser.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, then ~/.kube/config)")
    if context:
        parser.add_argument("--context", help="kubeconfig context to use (default: its current-context)")


def _output_flag(parser: argparse.ArgumentParser, choices: Sequence[str], default: str) -> None:
    help_ = f"output format (default: {default})"
    parser.add_argument("-o", "--output", choices=list(choices), default=default, help=help_)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tenant-platform",
        description=__doc__.splitlines()[0] if __doc__ else "",
        epilog="Exit codes: 0 OK, 1 a failed check, 2 bad input or usage, 3 cannot reach or authenticate to the "
        "cluster, 4 internal error (docs/cli.md).",
    )
    parser.add_argument("--version", action="version", version=__version__, help="print the version and exit")
    sub = parser.add_subparsers(dest="command", required=True)

    dev = sub.add_parser("dev", help="local control plane + seeded cluster + sample + operator")
    dev.add_argument("--once", action="store_true", help="exit after Ready (0) or the timeout (1)")
    _output_flag(dev, ("table", "json", "yaml"), "table")
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
    _cluster_flags(run)
    run.add_argument(
        "--drift-interval",
        type=float,
        metavar="SECONDS",
        help="seconds between two drift checks of a platform (default: $TENANT_PLATFORM_DRIFT_INTERVAL, then 300)",
    )
    run.add_argument("--log-format", choices=list(LOG_FORMATS), help="plain (default) or json (one object per line)")
    run.add_argument("--log-level", choices=list(LOG_LEVELS), help="the least severe records logged (default info)")
    run.add_argument("--no-probes", dest="probes", action="store_false", help="no /healthz endpoint")
    run.add_argument("--no-metrics", dest="metrics", action="store_false", help="no /metrics endpoint")
    run.set_defaults(func=cmd_run)

    render = sub.add_parser("render", help="print every manifest the operator would apply")
    render.add_argument("-f", "--file", required=True, help="TenantPlatform YAML ('-' for stdin)")
    _output_flag(render, ("yaml", "json"), "yaml")
    render.set_defaults(func=cmd_render)

    facts = sub.add_parser("facts", help="print the install values of a live TenantPlatform")
    facts.add_argument("name", help="the TenantPlatform (cluster-scoped) to read")
    _cluster_flags(facts)
    _output_flag(facts, ("yaml", "json"), "yaml")
    facts.set_defaults(func=cmd_facts)

    check = sub.add_parser("check", help="read-only preflight; exit 1 when anything fails")
    check.add_argument("name", nargs="?", help="a TenantPlatform on the cluster to check (or -f FILE)")
    check.add_argument("-f", "--file", help="check this TenantPlatform YAML file instead of a live one")
    _cluster_flags(check)
    _output_flag(check, ("table", "json", "yaml"), "table")
    check.set_defaults(func=cmd_check)

    fit = sub.add_parser("fit", help="which GPU nodes could take such a pod now, and for each that cannot, why")
    fit.add_argument(
        "--memory", type=_non_negative, metavar="MIB", help="GPU memory per card in MiB (default: whole cards)"
    )
    fit.add_argument("--cores", type=_non_negative, metavar="PCT", help="percent of each card's cores (default 0)")
    fit.add_argument("--cards", type=_positive, metavar="N", help="cards, on one node (default 1)")
    fit.add_argument("--platform", metavar="NAME", help="apply this TenantPlatform's GPU share (spec.gpu.share)")
    fit.add_argument(
        "--namespace",
        metavar="NS",
        help="with --platform: the pod's namespace (default: the platform's spec.namespace)",
    )
    fit.add_argument(
        "--hami-namespace",
        metavar="NS",
        help="where HAMi's ConfigMap names its resources (default: the platform's spec.gpu.hami.configMapNamespace, "
        "else kube-system)",
    )
    fit.add_argument("--snapshot", metavar="FILE", help="answer offline from a snapshot file (no cluster)")
    fit.add_argument("--save-snapshot", metavar="FILE", help="write what the fit reads to FILE (YAML; JSON for *.json)")
    _cluster_flags(fit)
    _output_flag(fit, ("text", "json"), "text")
    fit.set_defaults(func=cmd_fit)

    diagnose = sub.add_parser("diagnose", help="one redacted archive of what support asks first (read-only)")
    diagnose.add_argument(
        "-o", "--output", metavar="FILE", help="the archive (default: tenant-platform-diagnose-<time>.tar.gz)"
    )
    diagnose.add_argument(
        "-n",
        "--namespace",
        default=OPERATOR_NAMESPACE,
        help=f"the operator's namespace (default: {OPERATOR_NAMESPACE})",
    )
    _cluster_flags(diagnose)
    diagnose.set_defaults(func=cmd_diagnose)

    version = sub.add_parser("version", help="this command's version and the operator's on the cluster")
    version.add_argument("--client", action="store_true", help="only this command's version (no cluster)")
    _cluster_flags(version)
    version.add_argument(
        "-n",
        "--namespace",
        default=OPERATOR_NAMESPACE,
        help=f"the operator's namespace (default: {OPERATOR_NAMESPACE})",
    )
    _output_flag(version, ("text", "json", "yaml"), "text")
    version.set_defaults(func=cmd_version)

    completion = sub.add_parser("completion", help="print a shell completion script (bash or zsh)")
    completion.add_argument("shell", choices=["bash", "zsh"], help="the shell to complete for")
    completion.set_defaults(func=cmd_completion)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)  # usage errors: argparse prints them and exits 2
    if args.command == "check" and not (args.name or args.file):
        parser.error("check needs a TenantPlatform NAME or -f FILE")
    if args.command == "fit":
        if args.snapshot and args.save_snapshot:
            parser.error("fit: --snapshot reads a snapshot, --save-snapshot writes one: pass one of them")
        if not args.save_snapshot and (args.memory, args.cores, args.cards) == (None, None, None):
            parser.error("fit needs --memory, --cores or --cards (or --save-snapshot FILE)")
    return guard(args.command, lambda: args.func(args))


if __name__ == "__main__":
    raise SystemExit(main())
