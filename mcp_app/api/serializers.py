"""Definitions as JSON: tools, prompts, resources and templates, validated by the models' own clean().

Every write runs the row's `full_clean` (mcp_app/definitions/checks.py through each model's `clean()`, the
field validators, the per-tenant unique constraints) on the row as it would be saved, so the API and
the admin share one implementation and the same messages (DRF's own duplicate validators are
dropped). What a read returns can be sent back: read-only fields (id, updated_at, secret names,
size) are ignored on write, so a fetched object, renamed and POSTed, is a copy (AMB-52).
"""

from __future__ import annotations

import base64
import binascii
import copy
import mimetypes
from typing import TYPE_CHECKING, Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import models
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from mcp_app.api.errors import django_errors
from mcp_app.drafts import service as drafts
from mcp_app.handlers.secrets import check_secret_headers, encrypt_secrets, secret_names
from mcp_app.models import MAX_UPLOAD_BYTES, Prompt, Resource, ResourceTemplate, Tool

# `version` (0: never published) and `draft` (pending changes) are read-only too: not editable fields.
READ_ONLY = ("id", "updated_at")


class CleanedModelSerializer(serializers.ModelSerializer):
    """A ModelSerializer whose only row validation is the model's full_clean (the admin's too)."""

    def get_fields(self) -> dict[str, serializers.Field]:
        fields = super().get_fields()
        for field in fields.values():
            if not field.read_only:
                # Model validators and max lengths run once, in full_clean, with Django's words.
                field.validators = []
        return fields

    def candidate(self, attrs: dict[str, Any]) -> models.Model:
        """The row as it would be saved with these attributes (never saved here)."""
        model: type[models.Model] = self.Meta.model
        row: Any = copy.copy(self.instance) if self.instance is not None else model()  # a tenant's row
        row.tenant = self.context["tenant"]
        for name, value in attrs.items():
            setattr(row, name, value)
        return row

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        try:
            self.candidate(attrs).full_clean()
        except DjangoValidationError as error:
            raise serializers.ValidationError(django_errors(error)) from None
        return attrs

    # The row's model varies with the subclass (a definition, an Upstream, a Provider, a Tenant): Any.
    def create(self, validated: dict[str, Any]) -> Any:
        if not self.context.get("stage"):
            return super().create(validated)
        model: type[models.Model] = self.Meta.model
        row = model(**validated)
        assert drafts.is_drafted(row), "only the definitions' views stage (?draft=true)"
        return drafts.stage(row, self.context["request"].user)

    def update(self, instance: Any, validated: dict[str, Any]) -> Any:
        if not self.context.get("stage"):
            return super().update(instance, validated)
        # `instance` has its draft applied (the view's get_object): a PATCH edits the draft.
        for name, value in validated.items():
            setattr(instance, name, value)
        return drafts.stage(instance, self.context["request"].user)


# A mixin of a CleanedModelSerializer: the type checker sees it as one (candidate, create, update).
if TYPE_CHECKING:
    _SecretsBase = CleanedModelSerializer
else:
    _SecretsBase = serializers.Serializer


class SecretHeadersMixin(_SecretsBase):
    """Write-only `secrets` (header → value, stored encrypted in `secrets_field`) and readable `secret_names`."""

    secrets_field = "handler_secrets"
    secrets = serializers.DictField(
        child=serializers.CharField(allow_blank=True, trim_whitespace=False),
        write_only=True,
        required=False,
        allow_null=True,
        help_text="Secret headers (header → value), stored encrypted and never returned: an object "
        "replaces the stored set, {} removes it, absent or null keeps it.",
    )
    secret_names = serializers.SerializerMethodField(help_text="Names of the stored secret headers.")

    def get_secret_names(self, row: models.Model) -> list[str]:
        return secret_names(getattr(row, self.secrets_field))

    def validate_secrets(self, value: dict[str, str] | None) -> dict[str, str] | None:
        if value is None:
            return None
        try:
            return check_secret_headers(value)
        except DjangoValidationError as error:
            raise serializers.ValidationError(error.messages) from None

    def candidate(self, attrs: dict[str, Any]) -> models.Model:
        return super().candidate({k: v for k, v in attrs.items() if k != "secrets"})

    def _with_secrets(self, validated: dict[str, Any]) -> dict[str, Any]:
        value = validated.pop("secrets", None)
        if value is not None:
            validated[self.secrets_field] = encrypt_secrets(value) if value else ""
        return validated

    def create(self, validated: dict[str, Any]) -> models.Model:
        return super().create(self._with_secrets(validated))

    def update(self, instance: models.Model, validated: dict[str, Any]) -> models.Model:
        return super().update(instance, self._with_secrets(validated))


class ToolSerializer(SecretHeadersMixin, CleanedModelSerializer):
    class Meta:
        model = Tool
        # An upstream tool's upstream is named in its handler_config, read and written (AMB-310).
        exclude = ("tenant", "handler_secrets", "upstream")
        read_only_fields = READ_ONLY

    def to_representation(self, instance: Tool) -> dict[str, Any]:
        data = super().to_representation(instance)
        if "handler_config" in data:
            data["handler_config"] = instance.wire_config()
        return data


class PromptSerializer(CleanedModelSerializer):
    class Meta:
        model = Prompt
        exclude = ("tenant",)
        read_only_fields = READ_ONLY


class ResourceTemplateSerializer(CleanedModelSerializer):
    class Meta:
        model = ResourceTemplate
        exclude = ("tenant",)
        read_only_fields = READ_ONLY


@extend_schema_field(OpenApiTypes.BYTE)
class Base64Field(serializers.Field):
    """Binary contents as base64 text (null for a text resource)."""

    def to_representation(self, value: bytes | memoryview) -> str:
        return base64.b64encode(bytes(value)).decode("ascii")

    def to_internal_value(self, data: Any) -> bytes:
        if not isinstance(data, str):
            raise serializers.ValidationError("Send binary contents as a base64 string.")
        try:
            return base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            raise serializers.ValidationError("This is not valid base64.") from None


class ResourceSerializer(CleanedModelSerializer):
    """A resource's text, or binary contents: base64 `blob` in JSON, or an `upload` (multipart)."""

    blob = Base64Field(
        required=False,
        allow_null=True,
        help_text="Binary contents, base64 (null: a text resource). Leave out to keep them.",
    )
    upload = serializers.FileField(
        write_only=True, required=False, help_text="A file whose bytes become the binary contents (multipart)."
    )
    size = serializers.IntegerField(read_only=True, help_text="Bytes of the contents.")
    is_binary = serializers.BooleanField(read_only=True)

    class Meta:
        model = Resource
        exclude = ("tenant",)
        read_only_fields = READ_ONLY

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        # The admin form's rules (ResourceAdminForm.clean): an upload or text, never both; 10 MiB.
        upload = attrs.pop("upload", None)
        if upload is not None:
            if "blob" in attrs:
                raise serializers.ValidationError({"upload": ["Send either blob or upload, not both."]})
            if upload.size > MAX_UPLOAD_BYTES:
                raise serializers.ValidationError(
                    {"upload": [f"The file is larger than {MAX_UPLOAD_BYTES // (1024 * 1024)} MiB."]}
                )
            upload.seek(0)
            attrs["blob"] = upload.read()
            if not attrs.get("mime_type") or attrs["mime_type"] == "text/plain":
                guessed = upload.content_type
                if not guessed or guessed == "application/octet-stream":
                    guessed = mimetypes.guess_type(upload.name)[0] or "application/octet-stream"
                attrs["mime_type"] = guessed
        blob = attrs.get("blob", self.instance.blob if self.instance is not None else None)
        if blob is not None:
            if len(blob) > MAX_UPLOAD_BYTES:
                raise serializers.ValidationError(
                    {"blob": [f"The contents are larger than {MAX_UPLOAD_BYTES // (1024 * 1024)} MiB."]}
                )
            if attrs.get("text"):
                raise serializers.ValidationError(
                    {"text": ["A resource has text or binary contents, not both: set blob to null for text."]}
                )
            attrs["text"] = ""
        return super().validate(attrs)


class ResourceListSerializer(ResourceSerializer):
    """Resources in a list: everything but the binary contents (read one resource for those)."""

    def get_fields(self) -> dict[str, serializers.Field]:
        fields = super().get_fields()
        fields.pop("blob")
        return fields
