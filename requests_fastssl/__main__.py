"""``python -m requests_fastssl bench | doctor``: see ``_requests_fastssl._cli``."""

from __future__ import annotations

from _requests_fastssl._cli import main

raise SystemExit(main())
