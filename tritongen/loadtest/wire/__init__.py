"""The wire as the reference: a run's loopback traffic captured, and each request's times read off it.

:mod:`.capture` runs tcpdump on the loopback interface for the server's port; :mod:`.packets`
reads the capture into each connection's segments; :mod:`.http1` and :mod:`.http2` turn them
into requests (when a request's first byte went out, when its response's last byte came back,
each response event between); :mod:`.check` joins them to the client's own record by request id.
"""
