"""PURE pieces every concern shares: conditions and the Ready summary, the verdict type, ownership
and adoption sentences, templating, the domain claims both the Gateway and DNS honour, and the
ingress gateway Service's addresses. No I/O, no clock (``now`` is passed in)."""
