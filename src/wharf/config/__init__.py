"""Settings models and global configuration. The only package that reads ``os.environ``."""
