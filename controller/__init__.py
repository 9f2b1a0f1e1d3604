"""Controllers: the reference paper's Setup II and the related schemes, on top of the harness.

- ``controller.policy``: the Policy seam (measurements in, an interface set and optional per-path
  rate caps out, one-shot or periodic) and its registry; ``all-wifi``, ``all-lte``, ``all-both``,
  ``ref-is``, ``ref-is-tuned``.
- ``controller.model``: an exported energy model (``model.onnx`` + ``model.json``) through ONNX
  Runtime alone, and the check that it covers a scenario.
- ``controller.steering``: the Steering seam (apply a decision network-side or host-side, and count
  bytes per receiver and network as the controller sees them) with the ``nftables``, ``openflow``
  and ``host`` backends.
- ``controller.setup2``: the probing / deciding / steering loop the campaign runner calls through
  ``harness.policy.SampleControl``.

Imports ``harness`` only (never ``training``, ``analysis`` or ``mplab``).
"""
