"""`memsync ui`: a local page over a hub's memories (history/ and sync/ underneath), served by
Starlette and uvicorn with Jinja2 templates. Only `cli/ui.py` imports it, inside its command:
nothing else of memsync loads these libraries (the `ui` extra)."""
