"""Protobuf message classes built at test time (no protoc here): a FileDescriptorProto written with descriptor_pb2,
added to a pool of its own, its classes made by message_factory — what generated `_pb2` modules hold."""

from __future__ import annotations

from typing import Any


def _field(name: str, number: int, kind: str, *, repeated: bool = False, type_name: str | None = None,
           oneof: int | None = None, proto3_optional: bool = False) -> Any:
    from google.protobuf import descriptor_pb2

    F = descriptor_pb2.FieldDescriptorProto
    f = F(name=name, number=number, type=getattr(F, f"TYPE_{kind.upper()}"),
          label=F.LABEL_REPEATED if repeated else F.LABEL_OPTIONAL, json_name=name)
    if type_name is not None:
        f.type_name = type_name
    if oneof is not None:
        f.oneof_index = oneof
    if proto3_optional:
        f.proto3_optional = True
    return f


def order_file(name: str = "shop/orders.proto", package: str = "shop", extra: bool = False) -> Any:
    """shop.Order: scalars of every kind, an enum, a nested message, repeated fields, a map, a oneof, a Timestamp,
    proto3 `optional`, a wrapper; `extra` adds `string channel = 19` (a later version)."""
    from google.protobuf import descriptor_pb2

    D = descriptor_pb2.DescriptorProto
    fd = descriptor_pb2.FileDescriptorProto(name=name, package=package, syntax="proto3",
                                            dependency=["google/protobuf/timestamp.proto", "google/protobuf/wrappers.proto"])
    order = D(name="Order")
    p = f".{package}.Order"
    order.field.extend([
        _field("id", 1, "int64"), _field("customer", 2, "string"), _field("amount", 3, "double"),
        _field("status", 4, "enum", type_name=f"{p}.Status"),
        _field("address", 5, "message", type_name=f"{p}.Address"),
        _field("tags", 6, "string", repeated=True),
        _field("items", 7, "message", repeated=True, type_name=f"{p}.Item"),
        _field("counts", 8, "message", repeated=True, type_name=f"{p}.CountsEntry"),
        _field("card", 9, "string", oneof=0), _field("voucher", 10, "int32", oneof=0),
        _field("created", 11, "message", type_name=".google.protobuf.Timestamp"),
        _field("note", 12, "string", oneof=1, proto3_optional=True),
        _field("parent", 13, "message", type_name=".google.protobuf.Int64Value"),
        _field("delta", 14, "sint32"), _field("big", 15, "uint64"), _field("flag", 16, "bool"),
        _field("blob", 17, "bytes"), _field("ratio", 18, "float"),
    ])
    if extra:
        order.field.append(_field("channel", 19, "string"))
    order.oneof_decl.add(name="payment")
    order.oneof_decl.add(name="_note")
    status = order.enum_type.add(name="Status")
    for i, n in enumerate(["UNKNOWN", "PAID", "SHIPPED"]):
        status.value.add(name=n, number=i)
    address = order.nested_type.add(name="Address")
    address.field.extend([_field("city", 1, "string"), _field("zip", 2, "int32")])
    item = order.nested_type.add(name="Item")
    item.field.extend([_field("sku", 1, "string"), _field("qty", 2, "uint32")])
    entry = order.nested_type.add(name="CountsEntry")
    entry.options.map_entry = True
    entry.field.extend([_field("key", 1, "string"), _field("value", 2, "int64")])
    fd.message_type.append(order)
    return fd


def tree_file() -> Any:
    """shop.Tree, which holds its children: a recursive message."""
    from google.protobuf import descriptor_pb2

    fd = descriptor_pb2.FileDescriptorProto(name="shop/tree.proto", package="shop", syntax="proto3")
    tree = fd.message_type.add(name="Tree")
    tree.field.extend([_field("label", 1, "string"), _field("children", 2, "message", repeated=True, type_name=".shop.Tree")])
    return fd


def message_class(*files: Any, message: str) -> Any:
    """The class of `message` (full name) from `files` (the imports first), in a pool of their own."""
    from google.protobuf import descriptor_pb2, descriptor_pool, timestamp_pb2, wrappers_pb2
    from google.protobuf.message_factory import GetMessageClass

    pool = descriptor_pool.DescriptorPool()
    for known in (timestamp_pb2, wrappers_pb2):
        pool.Add(descriptor_pb2.FileDescriptorProto.FromString(known.DESCRIPTOR.serialized_pb))
    for fd in files:
        pool.Add(fd)
    return GetMessageClass(pool.FindMessageTypeByName(message))
