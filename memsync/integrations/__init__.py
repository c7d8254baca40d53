"""memsync inside agent frameworks: the Claude memory tool backend and the MCP server.

`session` opens a memory for one agent session (pull at start, a version per write, push at
checkpoints and at the end); `files` holds the file operations both front ends share; `search`
greps a memory within a budget; `arguments` words a bad tool call in one line; `private` creates
files and folders 0600/0700 whatever the umask. docs/SECURITY.md, "The agent-facing tools", says
what each guarantees.
"""
