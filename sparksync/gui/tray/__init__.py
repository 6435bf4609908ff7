"""The tray icon, its menu and the notifications it shows."""
