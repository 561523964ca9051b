"""The REST API: ``create_app`` in ``service.api.app``, wire bodies in ``service.wire``.

Importing this package imports nothing heavy, so the SDK can use ``service.wire`` alone.
"""
