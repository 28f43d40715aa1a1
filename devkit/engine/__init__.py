"""A fast engine that behaves like DynamoDB: dynalite behind the semantics proxy, which applies
devkit.semantics' model (transaction conflicts, per-key ceilings, DynamoDB's error shapes) at
HTTP level, so every client in any language meets it, and serves TransactWriteItems itself.

    with Engine() as engine:                      # both processes, stopped on exit
        client = make_client(endpoint_url=engine.endpoint_url, ...)
        engine.stats()                            # what the proxy refused, per table and key
    with running_engine(port=0) as endpoint_url:  # the same, yielding the URL

  engine    Engine: the two processes (the demo, make local, the tests and benches start it)
  proxy     the proxy: the model judged per request, reads and single writes
  transact  TransactWriteItems on a server without transactions
  items     each table's model, the item locks
  upstream  the pool of keep-alive connections to dynalite
  serve     `python -m devkit.engine`: the proxy's own process
"""

from devkit.engine.engine import RAW_NOTE, Engine, port_in_use, running_engine
from devkit.engine.proxy import ProxyOptions
from devkit.engine.serve import PortInUseError

__all__ = ["RAW_NOTE", "Engine", "PortInUseError", "ProxyOptions", "port_in_use", "running_engine"]
