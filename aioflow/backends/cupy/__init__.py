"""aioflow.backends.cupy"""
