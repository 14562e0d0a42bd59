"""``python -m requests_fastssl bench | doctor``: see ``_requests_fastssl.cli``."""

from __future__ import annotations

from _requests_fastssl.cli import main

raise SystemExit(main())
