"""What `railyard up` imports to start, without a blueprint: every server start (each test's,
too) paid ~0.2 s of CPU for the simulator, the twin, numpy and the YAML loader, which only a
what-if, a chart, a blueprint or the across-node checks use, and alembic, which only a store
to migrate needs. They load where they are used."""

from __future__ import annotations

import json
import subprocess
import sys

NOT_AT_START = ["numpy", "yaml", "alembic", "railyard.sim", "railyard.twin",
                "railyard.fabric.build", "railyard.blueprint.loader", "railyard.blueprint.models",
                "railyard.health.expect"]  # fmt: skip

# the modules `up` imports before it serves (cli.up's and control.server's own)
PROBE = """
import json, sys
import railyard.cli.up, railyard.control.server, railyard.control.metrics.sampler
import railyard.web.routes, railyard.web.whatif
print(json.dumps(sorted(sys.modules)))
"""


def test_a_server_start_imports_none_of_what_only_some_requests_use() -> None:
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                          check=True)  # fmt: skip
    loaded = json.loads(done.stdout)
    heavy = [m for m in loaded if any(m == h or m.startswith(h + ".") for h in NOT_AT_START)]
    assert heavy == []
    assert "railyard.control.api.app" in loaded  # the probe saw the server's own imports
