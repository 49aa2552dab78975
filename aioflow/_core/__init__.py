"""aioflow._core"""
