"""Python-backend ``model.py`` files that serve artifacts on the embedded (local) server.

Each file here is copied verbatim into ``<model>/1/model.py``. It must stay
self-contained: in a container it runs without tritongen installed.
"""
