"""``anchorage images`` of this checkout, for ``make images`` and ``anchorage dev cluster`` (which run it with the
checkout's own package, installed or not). The code is ``operator/anchorage/images/``.

    python tools/images.py build agent-base verifier operator --smoke
    python tools/images.py push --registry REGISTRY
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "operator"))

from anchorage.cli import main  # (after the path of a plain checkout)

if __name__ == "__main__":
    sys.argv = ["anchorage", "images", *sys.argv[1:]]
    main()
