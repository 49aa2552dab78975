"""aioflow.engine"""
