"""The contracts a plugin author implements; imports nothing from runtime, Spark or Kafka."""

from gobblin_py.api.batches import BatchConverter, BatchExtractor, BatchWriter, CsvBlock, JsonLines, RawBatch
from gobblin_py.api.commit_step import CommitStep, StepStatus
from gobblin_py.api.committer import (
                                      Claimant,
                                      Committer,
                                      DataPublisher,
                                      DatasetCommit,
                                      GlobalCommitter,
                                      PublishContext,
                                      TableCompaction,
                                      TableFile,
                                      TableReplace,
                                      TargetWatermarks,
)
from gobblin_py.api.context import SourceMessage, TaskContext, TaskResources
from gobblin_py.api.converter import Converter, OneToOneConverter, TaskCounter
from gobblin_py.api.fork import ForkOperator
from gobblin_py.api.plugin import NoSettings, Plugin, Settings
from gobblin_py.api.quality import BranchStats, RowPolicy, RowPolicyType, TaskPolicy, TaskPolicyType
from gobblin_py.api.source import Extractor, Source, SourceState
from gobblin_py.api.split import Split, SplitMismatch
from gobblin_py.api.types import Record, Schema, SchemaKind, WatermarkValue
from gobblin_py.api.upkeep import PendingCommit, TableUpkeep, UpkeepAction, UpkeepRequest
from gobblin_py.api.workunit import KeyRange, MultiWorkUnit, WorkUnit, flatten
from gobblin_py.api.writer import (
                                      DataWriter,
                                      DedupSpec,
                                      Delivery,
                                      FileMerger,
                                      MergedFiles,
                                      MergeSpec,
                                      OutputFile,
                                      WriterTarget,
)
from gobblin_py.errors import RecordError, TaskError

__all__ = [
                                      "BatchConverter",
                                      "BatchExtractor",
                                      "BatchWriter",
                                      "BranchStats",
                                      "Claimant",
                                      "CommitStep",
                                      "Committer",
                                      "Converter",
                                      "CsvBlock",
                                      "DataPublisher",
                                      "DataWriter",
                                      "DatasetCommit",
                                      "DedupSpec",
                                      "Delivery",
                                      "Extractor",
                                      "FileMerger",
                                      "ForkOperator",
                                      "GlobalCommitter",
                                      "JsonLines",
                                      "KeyRange",
                                      "MergeSpec",
                                      "MergedFiles",
                                      "MultiWorkUnit",
                                      "NoSettings",
                                      "OneToOneConverter",
                                      "OutputFile",
                                      "PendingCommit",
                                      "Plugin",
                                      "PublishContext",
                                      "RawBatch",
                                      "Record",
                                      "RecordError",
                                      "RowPolicy",
                                      "RowPolicyType",
                                      "Schema",
                                      "SchemaKind",
                                      "Settings",
                                      "Source",
                                      "SourceMessage",
                                      "SourceState",
                                      "Split",
                                      "SplitMismatch",
                                      "StepStatus",
                                      "TableCompaction",
                                      "TableFile",
                                      "TableReplace",
                                      "TableUpkeep",
                                      "TargetWatermarks",
                                      "TaskContext",
                                      "TaskCounter",
                                      "TaskError",
                                      "TaskPolicy",
                                      "TaskPolicyType",
                                      "TaskResources",
                                      "UpkeepAction",
                                      "UpkeepRequest",
                                      "WatermarkValue",
                                      "WorkUnit",
                                      "WriterTarget",
                                      "flatten",
]
