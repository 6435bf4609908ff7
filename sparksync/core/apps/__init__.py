"""What the desktop offers around the nodes: launchers, settings, start at login.

- ``custom_apps``: named ports on a node reached through a tunnel, with a start script;
- ``terminal``: a terminal with SSH to a node;
- ``settings``: the app's settings file;
- ``autostart``: starting the app at login.
"""
