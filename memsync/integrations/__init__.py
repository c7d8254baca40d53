"""memsync inside agent frameworks: the Claude memory tool backend and the MCP server.

`session` opens a memory for one agent session (pull at start, a version per write, push at
checkpoints and at the end); `files` holds the file operations both front ends share.
"""
