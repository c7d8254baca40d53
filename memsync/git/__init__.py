"""The git engine: the only package that imports pygit2 and cffi.

Everything above it deals in paths, hex ids and dataclasses; pygit2 errors are translated into
memsync errors where they enter. Importing it changes no process-wide libgit2 setting: engine.py
applies those when a repository is first opened.
"""
