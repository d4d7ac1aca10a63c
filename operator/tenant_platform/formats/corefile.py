"""PURE Corefile editing: our marked rewrite blocks inside CoreDNS's main server block.

Each TenantPlatform owns one block, delimited by marker comments, placed inside the server block
that holds the ``kubernetes`` plugin and above that plugin's line::

    .:53 {
        errors
        # BEGIN tenant-platform demo
        rewrite name exact kamiwaza.example.com istio-ingressgateway.istio-system.svc.cluster.local
        # END tenant-platform demo
        kubernetes cluster.local in-addr.arpa ip6.arpa {
        ...

Every function takes and returns text; nothing here reads the cluster. ``upsert_block`` returns
its input unchanged when our block is already right (so the caller can skip the write), keeps
other platforms' blocks exactly where they are, and uses the indentation of the ``kubernetes``
line (tabs or spaces). ``remove_block`` removes only our block. A Corefile without a
``kubernetes`` plugin, or with a marker left unterminated, raises CorefileError: we never guess.

``take_over`` is ``upsert_block`` that also removes a hand-made rewrite of the same domain (the
checklist's line, or a server block of its own for the domain), for a cluster prepared by hand
whose admin opted the CoreDNS ConfigMap in (concerns/dns/verdict.py decides; docs/migration.md).

The parser understands what we need of the Caddyfile syntax CoreDNS uses: server blocks
(``keys {``), nested plugin blocks, ``# comments``, quoted tokens and ``{$ENV}`` placeholders.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from tenant_platform.api import constants

MARKER = "tenant-platform"
BEGIN_PATTERN = re.compile(r"^\s*#\s*BEGIN\s+tenant-platform\s+(\S+)\s*$")
END_PATTERN = re.compile(r"^\s*#\s*END\s+tenant-platform\s+(\S+)\s*$")
KUBERNETES_PLUGIN = "kubernetes"
RELOAD_PLUGIN = "reload"
# The key of our import file in a distribution's ``coredns-custom`` ConfigMap (k3s, AKS import
# every ``*.override`` key into the main server block).
OVERRIDE_SUFFIX = ".override"


class CorefileError(ValueError):
    """The Corefile cannot be edited safely; the message says why, for a condition."""


def begin_marker(platform: str) -> str:
    return f"# BEGIN {MARKER} {platform}"


def end_marker(platform: str) -> str:
    return f"# END {MARKER} {platform}"


def rewrite_line(domain: str, service_host: str) -> str:
    return f"rewrite name exact {domain} {service_host}"


def render_block(platform: str, domain: str, service_host: str, *, indent: str = "    ") -> list[str]:
    """Our block's lines, each prefixed with ``indent``."""
    return [
        f"{indent}{begin_marker(platform)}",
        f"{indent}{rewrite_line(domain, service_host)}",
        f"{indent}{end_marker(platform)}",
    ]


def override_key(platform: str) -> str:
    """Our key in a ``coredns-custom`` import ConfigMap."""
    return f"{MARKER}-{platform}{OVERRIDE_SUFFIX}"


def render_override(platform: str, domain: str, service_host: str) -> str:
    """The content of our ``*.override`` key: a comment naming the owner and the rewrite."""
    return (
        f"# Managed by {constants.MANAGED_BY_VALUE} for TenantPlatform {platform}; edits are reverted.\n"
        f"{rewrite_line(domain, service_host)}\n"
    )


# -- parsing ------------------------------------------------------------------------------------


@dataclass
class Directive:
    """A plugin line directly inside a server block: its name, arguments and line index."""

    name: str
    args: list[str]
    line: int


@dataclass
class ServerBlock:
    """A top-level server block: its keys (zones), first and last line, and its directives."""

    keys: list[str]
    start: int
    end: int
    directives: list[Directive] = field(default_factory=list)

    def directive(self, name: str) -> Directive | None:
        for item in self.directives:
            if item.name == name:
                return item
        return None

    @property
    def is_root(self) -> bool:
        """Whether a key serves the root zone (``.``, ``.:53``, ``dns://.:53``)."""
        return any(zone_of(key) == "." for key in self.keys)


def zone_of(key: str) -> str:
    """The zone of a server key: ``dns://.:53`` -> ``.``, ``example.com:53`` -> ``example.com.``."""
    value = key
    if "://" in value:
        value = value.split("://", 1)[1]
    if ":" in value:
        value = value.rsplit(":", 1)[0]
    value = value.strip().lower() or "."
    return value if value.endswith(".") else value + "."


def _strip_comment(line: str) -> str:
    """The line without a trailing ``# comment`` (a ``#`` inside quotes is kept)."""
    quoted = False
    for index, char in enumerate(line):
        if char == '"' and (index == 0 or line[index - 1] != "\\"):
            quoted = not quoted
        elif char == "#" and not quoted and (index == 0 or line[index - 1].isspace()):
            return line[:index]
    return line


def _tokens(line: str) -> list[str]:
    out: list[str] = []
    current = ""
    quoted = False
    has_token = False
    for index, char in enumerate(line):
        if char == '"' and (index == 0 or line[index - 1] != "\\"):
            quoted = not quoted
            has_token = True
            continue
        if char.isspace() and not quoted:
            if has_token:
                out.append(current)
            current, has_token = "", False
            continue
        current += char
        has_token = True
    if has_token:
        out.append(current)
    return out


def _brace_delta(token: str) -> int:
    """+1 for a token opening a block, -1 for one closing it, 0 otherwise.

    ``{$ENV}`` and ``{env.X}`` placeholders are not braces.
    """
    if token == "{":
        return 1
    if token == "}":
        return -1
    if token.startswith("{") and token.endswith("}"):
        return 0
    if token.endswith("{") and not token.startswith("{"):
        return 1
    return 0


def parse(text: str) -> list[ServerBlock]:
    """Every top-level server block (snippets ``(name) {...}`` are skipped).

    Raises CorefileError for unbalanced braces.
    """
    lines = text.splitlines()
    blocks: list[ServerBlock] = []
    depth = 0
    current: ServerBlock | None = None
    pending_keys: list[str] = []
    for index, raw in enumerate(lines):
        tokens = _tokens(_strip_comment(raw))
        if not tokens:
            continue
        if depth == 0:
            opens = sum(1 for t in tokens if _brace_delta(t) == 1)
            keys = pending_keys + [t.rstrip("{") for t in tokens if t != "{" and t.rstrip("{")]
            if opens:
                pending_keys = []
                snippet = bool(keys) and keys[0].startswith("(")
                current = None if snippet else ServerBlock(keys=[k.rstrip(",") for k in keys], start=index, end=index)
            else:
                # Keys may span lines (``a.example,`` then ``b.example {``); top-level ``import``
                # lines are not keys.
                pending_keys = [] if tokens[0] == "import" else keys
        elif depth == 1 and current is not None and tokens[0] not in ("{", "}"):
            current.directives.append(Directive(tokens[0], [t for t in tokens[1:] if _brace_delta(t) == 0], index))
        for token in tokens:
            depth += _brace_delta(token)
            if depth < 0:
                raise CorefileError(f"unbalanced braces: an extra '}}' on line {index + 1}")
        if depth == 0 and current is not None:
            current.end = index
            blocks.append(current)
            current = None
    if depth != 0:
        raise CorefileError("unbalanced braces: a '{' is never closed")
    return blocks


def dns_server_block(text: str) -> ServerBlock:
    """The server block our rewrite belongs in: the root-zone block with a ``kubernetes`` plugin.

    Falls back to the first block with a ``kubernetes`` plugin. Raises CorefileError when none has.
    """
    blocks = parse(text)
    with_kubernetes = [b for b in blocks if b.directive(KUBERNETES_PLUGIN) is not None]
    if not with_kubernetes:
        raise CorefileError(
            "no server block has the kubernetes plugin, so there is no in-cluster zone to rewrite the "
            "domain into; this Corefile is not a standard cluster DNS configuration"
        )
    for block in with_kubernetes:
        if block.is_root:
            return block
    return with_kubernetes[0]


@dataclass(frozen=True)
class MarkedBlock:
    platform: str
    start: int
    end: int
    body: list[str]


def marked_blocks(text: str) -> list[MarkedBlock]:
    """Every ``# BEGIN tenant-platform <name>`` ... ``# END tenant-platform <name>`` block.

    Raises CorefileError for a BEGIN without its END (or nested/mismatched markers).
    """
    lines = text.splitlines()
    found: list[MarkedBlock] = []
    open_name: str | None = None
    open_at = 0
    for index, line in enumerate(lines):
        begin = BEGIN_PATTERN.match(line)
        end = END_PATTERN.match(line)
        if begin:
            if open_name is not None:
                raise CorefileError(
                    f"marker '{begin_marker(open_name)}' on line {open_at + 1} has no matching END before line "
                    f"{index + 1}; fix or remove the marked block by hand"
                )
            open_name, open_at = begin.group(1), index
        elif end:
            if open_name is None or open_name != end.group(1):
                raise CorefileError(
                    f"marker '{end_marker(end.group(1))}' on line {index + 1} has no matching BEGIN; "
                    "fix or remove the marked block by hand"
                )
            found.append(MarkedBlock(open_name, open_at, index, [x.strip() for x in lines[open_at + 1 : index]]))
            open_name = None
    if open_name is not None:
        raise CorefileError(
            f"marker '{begin_marker(open_name)}' on line {open_at + 1} is never closed; fix or remove it by hand"
        )
    return found


def block_for(text: str, platform: str) -> MarkedBlock | None:
    for block in marked_blocks(text):
        if block.platform == platform:
            return block
    return None


def platforms(text: str) -> list[str]:
    """Names of the platforms with a marked block, in file order."""
    return [b.platform for b in marked_blocks(text)]


def _join(lines: list[str], like: str) -> str:
    out = "\n".join(lines)
    return out + "\n" if like.endswith("\n") or not like else out


def _indent_of(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def upsert_block(text: str, platform: str, domain: str, service_host: str) -> str:
    """``text`` with our block present and correct; ``text`` itself when nothing needs to change.

    An existing block of ours inside the DNS server block, above the kubernetes line, is updated
    in place (other platforms' blocks keep their order); anywhere else it is moved. A new block
    goes directly above the kubernetes line, after any blocks already there.
    """
    server = dns_server_block(text)
    kubernetes = server.directive(KUBERNETES_PLUGIN)
    assert kubernetes is not None  # dns_server_block guarantees it
    lines = text.splitlines()
    indent = _indent_of(lines[kubernetes.line])
    wanted = render_block(platform, domain, service_host, indent=indent)
    ours = [b for b in marked_blocks(text) if b.platform == platform]
    if len(ours) == 1:
        block = ours[0]
        if server.start < block.start and block.end < kubernetes.line:
            if lines[block.start : block.end + 1] == wanted:
                return text
            return _join(lines[: block.start] + wanted + lines[block.end + 1 :], text)
    stripped = remove_block(text, platform)
    server = dns_server_block(stripped)
    kubernetes = server.directive(KUBERNETES_PLUGIN)
    assert kubernetes is not None
    lines = stripped.splitlines()
    return _join(lines[: kubernetes.line] + wanted + lines[kubernetes.line :], text)


def remove_block(text: str, platform: str) -> str:
    """``text`` without our block(s); ``text`` itself when there is none."""
    blocks = [b for b in marked_blocks(text) if b.platform == platform]
    if not blocks:
        return text
    lines = text.splitlines()
    for block in reversed(blocks):
        del lines[block.start : block.end + 1]
    return _join(lines, text)


# -- a hand-made rewrite of the domain (the checklist's line), and its takeover ----------------------

REWRITE_PLUGIN = "rewrite"
_REWRITE_MODES = ("stop", "continue")


@dataclass(frozen=True)
class HandRewrite:
    """A ``rewrite name [exact] <domain> <host>`` line outside every marked block."""

    line: int
    text: str
    target: str
    """The host it rewrites the domain to."""
    placement: str
    """``dns-block``: in the server block our block goes in (the line is replaced); ``own-block``: in
    a server block of its own that serves only the domain (the whole block is replaced, or its
    queries would never reach our rewrite); ``elsewhere``: any other server block (left alone)."""
    block_start: int
    block_end: int


def _norm(name: str) -> str:
    return name.strip().lower().rstrip(".")


def _rewrites_domain(args: list[str], domain: str) -> str | None:
    """The target when ``args`` (after ``rewrite``) are ``[stop|continue] name [exact] <domain> <to>``."""
    rest = args[1:] if args and args[0] in _REWRITE_MODES else args
    if len(rest) < 3 or rest[0] != "name":
        return None
    rest = rest[1:]
    if rest[0] == "exact":
        rest = rest[1:]
    if len(rest) < 2 or _norm(rest[0]) != _norm(domain):
        return None
    return rest[1]


def hand_made_rewrites(text: str, domain: str) -> list[HandRewrite]:
    """Every rewrite of ``domain`` by exact name that no marker encloses (a person's, not a
    platform's), in file order. Raises CorefileError as ``parse``/``marked_blocks`` do."""
    lines = text.splitlines()
    marked = [(b.start, b.end) for b in marked_blocks(text)]
    dns_block = dns_server_block(text)
    zone = _norm(domain) + "."
    found = []
    for block in parse(text):
        own = bool(block.keys) and all(zone_of(key) == zone for key in block.keys)
        for directive in block.directives:
            if directive.name != REWRITE_PLUGIN or "{" in _strip_comment(lines[directive.line]):
                continue
            if any(start < directive.line < end for start, end in marked):
                continue
            target = _rewrites_domain(directive.args, domain)
            if target is None:
                continue
            placement = "own-block" if own else "elsewhere"
            if block.start == dns_block.start:
                placement = "dns-block"
            found.append(
                HandRewrite(directive.line, lines[directive.line].strip(), target, placement, block.start, block.end)
            )
    return found


def take_over(text: str, platform: str, domain: str, service_host: str) -> str:
    """``upsert_block`` after removing the hand-made rewrites of ``domain`` it can replace: a line in
    the DNS server block goes (that line only), a server block of its own serving only the domain
    goes whole. Rewrites elsewhere and every other line stay. One text: the caller writes it once,
    so no moment has neither rewrite."""
    hand = [h for h in hand_made_rewrites(text, domain) if h.placement != "elsewhere"]
    if not hand:
        return upsert_block(text, platform, domain, service_host)
    lines = text.splitlines()
    drop: set[int] = set()
    for rewrite in hand:
        if rewrite.placement == "own-block":
            drop |= set(range(rewrite.block_start, rewrite.block_end + 1))
        else:
            drop.add(rewrite.line)
    kept = _join([line for index, line in enumerate(lines) if index not in drop], text)
    return upsert_block(kept, platform, domain, service_host)


@dataclass(frozen=True)
class LiveRewrite:
    """A rewrite of the domain by exact name, wherever it came from (our block, a hand-made line,
    a distribution's configuration): its text, the host it rewrites to, and whether ours wrote it."""

    text: str
    target: str
    marked: bool
    """Inside a marked block (``# BEGIN tenant-platform <name>``)."""


def same_host(a: str, b: str) -> bool:
    """Whether two host names are the same name (case and a trailing dot aside)."""
    return _norm(a) == _norm(b)


def live_rewrites(text: str, domain: str) -> list[LiveRewrite]:
    """Every rewrite of ``domain`` in the DNS server block (``dns_server_block``), marked or not, in
    file order: what CoreDNS applies to the domain's queries there. Raises CorefileError as
    ``parse`` does."""
    lines = text.splitlines()
    marked = [(b.start, b.end) for b in marked_blocks(text)]
    found = []
    for directive in dns_server_block(text).directives:
        if directive.name != REWRITE_PLUGIN or "{" in _strip_comment(lines[directive.line]):
            continue
        target = _rewrites_domain(directive.args, domain)
        if target is None:
            continue
        inside = any(start < directive.line < end for start, end in marked)
        found.append(LiveRewrite(lines[directive.line].strip(), target, inside))
    return found


def override_rewrites(content: str, domain: str) -> list[LiveRewrite]:
    """The rewrites of ``domain`` in the content of an imported ``*.override`` file (plugin lines
    only, no server block)."""
    found = []
    for raw in content.splitlines():
        tokens = _tokens(_strip_comment(raw))
        if len(tokens) < 2 or tokens[0] != REWRITE_PLUGIN or "{" in tokens:
            continue
        target = _rewrites_domain(tokens[1:], domain)
        if target is not None:
            found.append(LiveRewrite(raw.strip(), target, False))
    return found


def has_reload(text: str) -> bool:
    """Whether the DNS server block has the ``reload`` plugin (CoreDNS then reloads edits itself)."""
    return dns_server_block(text).directive(RELOAD_PLUGIN) is not None


def override_imports(text: str) -> list[str]:
    """The ``import`` globs of the DNS server block that load ``*.override`` files (k3s, AKS)."""
    server = dns_server_block(text)
    return [
        arg
        for d in server.directives
        if d.name == "import"
        for arg in d.args
        if arg.endswith("*" + OVERRIDE_SUFFIX) or arg.endswith(OVERRIDE_SUFFIX)
    ]


def render_preview(platform: str, domain: str, service_host: str, *, namespace: str, name: str) -> dict[str, Any]:
    """A ConfigMap-shaped preview of our Corefile block, for ``tenant-platform render``.

    It is a fragment, never applied: the operator edits the live Corefile in place.
    """
    block = "\n".join(render_block(platform, domain, service_host)) + "\n"
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            # NB: never the live ConfigMap's own name: `render | kubectl apply` must not touch it.
            "name": f"{MARKER}-{platform}-corefile-preview",
            "namespace": namespace,
            "annotations": {
                f"{constants.GROUP}/render-note": (
                    "PREVIEW FRAGMENT, do not apply: the operator inserts this block into the live "
                    f"Corefile of ConfigMap {namespace}/{name}, inside the server block holding the "
                    "kubernetes plugin and above that plugin's line (or, where the distribution imports "
                    f"*.override files, into its coredns-custom ConfigMap under key {override_key(platform)})."
                ),
            },
        },
        "data": {f"Corefile.{MARKER}-{platform}.fragment": block},
    }
