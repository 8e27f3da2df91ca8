"""The load generator's shared definitions, as the tritongen package uses them (one place to import from).

They live in ``loadtests/tritonload/shared.py`` and ``request_data.py`` beside the locustfile,
which runs in Locust's processes without tritongen; they import only the standard library and
numpy.
tritongen ships the folder as ``tritongen.loadtests``; mypy knows the package by the name
the locustfile imports it under (``tritonload``, see pyproject's ``[tool.mypy]``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

# The modules' ``__all__``: what they define is what this module offers.
if TYPE_CHECKING:
    from tritonload.request_data import *  # noqa: F403
    from tritonload.request_data import __all__ as _data_names
    from tritonload.shared import *  # noqa: F403
    from tritonload.shared import __all__ as _shared_names
else:
    from tritongen.loadtests.tritonload.request_data import *  # noqa: F403
    from tritongen.loadtests.tritonload.request_data import __all__ as _data_names
    from tritongen.loadtests.tritonload.shared import *  # noqa: F403
    from tritongen.loadtests.tritonload.shared import __all__ as _shared_names

# The locustfile's option table (tritonload/options.py imports nothing but dataclasses and the
# kinds' names): what a Locust that stays up across runs is given with each run. The load kinds
# by name (tritonload/kinds.py, the standard library only): tritongen finds its side of each. The
# gaps of the arrival processes (tritonload/arrivals.py): a load shape draws its schedule with them.
if TYPE_CHECKING:
    from tritonload.arrivals import arrival_gaps
    from tritonload.kinds import AUTO_KIND, KINDS
    from tritonload.options import OPTIONS
else:
    from tritongen.loadtests.tritonload.arrivals import arrival_gaps
    from tritongen.loadtests.tritonload.kinds import AUTO_KIND, KINDS
    from tritongen.loadtests.tritonload.options import OPTIONS

__all__ = [*_shared_names, *_data_names, "AUTO_KIND", "KINDS", "OPTIONS", "arrival_gaps"]
