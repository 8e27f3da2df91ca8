"""The load generator behind ``loadtests/locustfile.py``: one module per job, imported by the locustfile.

Locust puts the locustfile's folder on ``sys.path``, so the locustfile imports this package as
``tritonload``; its modules import each other relatively. tritongen ships the folder as
``tritongen.loadtests`` and uses only :mod:`.shared` (through ``tritongen/io/loadgen_shared.py``).
This file imports nothing: importing the package must stay free of Locust and gevent.
"""
