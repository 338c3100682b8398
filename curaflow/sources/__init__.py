"""Sources of works: the :class:`~curaflow.sources.base.Source` protocol, the registry
of source kinds (:func:`~curaflow.sources.registry.build_source`, mirroring
:func:`~curaflow.routes.build_route`) and what every source shares — errors, the rate
gate, the scan frontier, the generic paged scan, ugoira (animated works → GIF).

Pixiv's app-api is :mod:`curaflow.sources.pixiv` (client, scan, filters, config,
login, replay).
"""
