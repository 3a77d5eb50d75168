"""Commands about hooks: list, create, audit, write, approve, history, signing keys, the MCP
server.
"""
