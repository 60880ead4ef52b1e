"""Job file loading and validation."""

from gobblin_py.config.job_files import load_job
from gobblin_py.config.model import BranchConfig, CommitPolicy, JobSpec, PluginConfig

__all__ = ["BranchConfig", "CommitPolicy", "JobSpec", "PluginConfig", "load_job"]
