"""The REST API: ``create_app`` in ``faithjudge.api.app``, wire bodies in
``faithjudge_client.bodies``.

Importing this package imports nothing heavy, so the SDK can use ``faithjudge_client.bodies`` alone.
"""
