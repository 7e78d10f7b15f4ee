"""Schemathesis over the real ASGI app: every operation of ``/openapi.json``, positive and
negative cases, seeded, and every failure collected (not just the first), so a campaign can
count them. Used by ``test_openapi_fuzz.py`` (small, in the default suite) and by
``benchmarks/fuzz_api.py`` (the long campaign)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import schemathesis
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

CHECKS = [
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
    content_type_conformance,
]
# Revoking the fuzzing user's own token ends the campaign early: fuzz that operation last.
LAST = ("DELETE /v1/tokens/{token_id}",)


@dataclass
class FuzzReport:
    requests: int = 0
    server_errors: int = 0
    statuses: Counter[int] = field(default_factory=Counter)
    failures: dict[str, str] = field(default_factory=dict)  # "METHOD path: check" -> example

    def merge(self, other: FuzzReport) -> None:
        self.requests += other.requests
        self.server_errors += other.server_errors
        self.statuses.update(other.statuses)
        self.failures.update(other.failures)


def fuzz(app: Any, token: str, *, examples: int, fuzz_seed: int) -> FuzzReport:
    """Fuzz every operation of ``app`` as the bearer of ``token``; return what was seen."""
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    operations = [r.ok() for r in schema.get_all_operations()]
    operations.sort(key=lambda op: op.label in LAST)
    report = FuzzReport()
    headers = {"Authorization": f"Bearer {token}"}
    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            try:
                _fuzz_one(operation, mode, headers, examples, fuzz_seed, report)
            except Unsatisfiable:  # nothing to negate in an operation without inputs
                continue
    return report


def _fuzz_one(
    operation: Any,
    mode: GenerationMode,
    headers: dict[str, str],
    examples: int,
    fuzz_seed: int,
    report: FuzzReport,
) -> None:
    @seed(fuzz_seed)
    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy(generation_mode=mode))
    def one(case: schemathesis.Case) -> None:
        report.requests += 1
        try:
            response = case.call(headers=headers)
        except Exception as exc:  # the in-process app raised: a 500 over the wire
            report.statuses[500] += 1
            report.server_errors += 1
            key = f"{operation.label} [{mode.value}]: unhandled {type(exc).__name__}"
            body = repr(case.body)[:300] if case.body is not None else ""
            example = f"{case.method} {case.formatted_path} query={case.query} body={body}"
            report.failures.setdefault(key, f"{example} -> {str(exc).splitlines()[:1]}")
            return
        report.statuses[response.status_code] += 1
        if response.status_code >= 500:
            report.server_errors += 1
        try:
            case.validate_response(response, checks=CHECKS, headers=headers)
        except (Exception, BaseExceptionGroup) as exc:  # collect every failure
            key = f"{operation.label} [{mode.value}]: {type(exc).__name__}"
            report.failures.setdefault(key, _example(case, response, exc))

    one()


def _example(case: schemathesis.Case, response: Any, exc: BaseException) -> str:
    body = repr(case.body)[:300] if case.body is not None else ""
    first = str(exc).strip().splitlines()[:6]
    return (
        f"{case.method} {case.formatted_path} query={case.query} body={body} -> "
        f"{response.status_code} {response.text[:200]!r}; " + " / ".join(first)
    )
