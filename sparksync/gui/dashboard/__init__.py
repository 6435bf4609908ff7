"""The live cluster dashboard: plots on one time axis, with toggles, window, pause, hover and export."""
