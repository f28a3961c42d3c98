"""The service: advisor serve, read-only, over one results database.

- server.py      the FastAPI application (create_app): its store, its errors, its address
- http_api.py    the JSON API under /api/v1
- dashboard.py   the pages (Jinja2 templates in templates/)
"""
