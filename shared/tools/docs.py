"""The generated parts of the docs and infra/, written from the registries: ``python -m shared.tools.docs``.

Each part sits between two markers in its file (or is a whole file: infra/registry.tf); the
command rewrites it (``--check`` only says which are stale, exit status 1). The unit tests fail on a stale part, so
a new setting or stage is one declaration and this command.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from shared.contract.config import load_settings, settings_table
from shared.formats.registry import kinds_table
from shared.runtime.stages import stage_table
from shared.tools import infra_registry

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Generated:
    path: str  # relative to the repository
    name: str  # the markers are <!-- name:start --> and <!-- name:end -->; "" for a whole file
    render: Callable[[], str]
    comment: str = "<!-- {} -->"  # how the file writes a marker ("# {}" in Terraform)

    @property
    def markers(self) -> tuple[str, str]:
        return self.comment.format(f"{self.name}:start"), self.comment.format(f"{self.name}:end")

    def embedded(self, root: Path = ROOT) -> str:
        path = root / self.path
        if not self.name:
            return path.read_text().strip() if path.exists() else ""
        start, end = self.markers
        text = path.read_text()
        if start not in text or end not in text:
            raise ValueError(f"{self.path} lost its {self.name} markers ({start} ... {end})")
        return text.split(start, 1)[1].split(end, 1)[0].strip()

    def write(self, root: Path = ROOT) -> bool:
        """Rewrite the part; True when it changed."""
        if self.embedded(root) == self.render().strip():
            return False
        if not self.name:
            (root / self.path).write_text(self.render())
            return True
        start, end = self.markers
        text = (root / self.path).read_text()
        before, rest = text.split(start, 1)
        after = rest.split(end, 1)[1]
        (root / self.path).write_text(f"{before}{start}\n{self.render().strip()}\n{end}{after}")
        return True


def endpoints_table() -> str:
    """The HTTP API's operations as ``/openapi.json`` lists them (method, path, summary), for docs/http-api.md."""
    # the gateway's types, imported only for this part
    from services.gateway.openapi import openapi_document

    document = openapi_document(load_settings({}))  # the defaults: the paths do not depend on settings
    rows = [(method.upper(), path, operation["summary"].replace("|", "\\|"))  # a bar would split the cell
            for path, methods in document["paths"].items() for method, operation in methods.items()]
    return "\n".join(["| method | path | what it does |", "|---|---|---|",
                      *(f"| {method} | `{path}` | {summary} |" for method, path, summary in rows)])


PARTS: tuple[Generated, ...] = (
    Generated("docs/configuration.md", "settings-table", settings_table),
    Generated("docs/architecture.md", "stage-table", stage_table),
    Generated("docs/formats.md", "file-kinds", kinds_table),
    Generated("docs/http-api.md", "endpoints", endpoints_table),
    Generated("docs/architecture.md", "file-kinds", kinds_table),
    Generated("infra/registry.tf", "", infra_registry.render),
    Generated("infra/terraform.tfvars.example", "models", infra_registry.render_tfvars, comment="# {}"),
)


def stale(root: Path = ROOT) -> list[str]:
    """The parts whose file no longer holds what the registries generate."""
    return [f"{p.path} ({p.name or 'whole file'})" for p in PARTS if p.embedded(root) != p.render().strip()]


def main(argv: list[str], root: Path = ROOT) -> int:
    if "--check" in argv:
        out_of_date = stale(root)
        for part in out_of_date:
            print(f"stale: {part}; run python -m shared.tools.docs")
        return 1 if out_of_date else 0
    for part in PARTS:
        if part.write(root):
            print(f"rewrote {part.path} ({part.name or 'whole file'})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
