"""``hookbus console``: the operator's web view of one namespace's fleet.

Server-rendered pages (jinja2) with one small script of its own (``static/console.js``: no
build step, no CDN), live through server-sent events, and a JSON API under ``/api/`` that
calls the same library functions as the CLI: :mod:`hookbus.approvals` for the approval
inbox, :mod:`hookbus.authoring.pending` and :mod:`hookbus.authoring.release` for agent-written
hooks, :mod:`hookbus.workers.fleet` for workers, backlogs and dead letters.

Every page and API call needs the console's token (:mod:`~hookbus.console.auth`). Nothing
here runs at import: :func:`~hookbus.console.app.create_app` builds the app.
"""
