"""``contextvec.api.convert`` writes every form through the one check of ``save``: a model loaded
in a low precision is refused in one line, before anything is written."""

from __future__ import annotations

import pytest

from contextvec.api import Conversion, ModelSpec, convert


def test_a_low_precision_model_is_refused_in_every_form(own_tiny_dir, tmp_path):
    """bilm-tf files were written from the int8 weights' state and failed with a KeyError."""
    for form in ("native", "bilm-tf"):
        out = tmp_path / form
        conversion = Conversion(ModelSpec(str(own_tiny_dir), precision="int8"), form)
        refused = "^cannot save a int8 encoder: load the model in fp32 to save it$"
        with pytest.raises(ValueError, match=refused):
            convert(conversion, out)
        assert not out.exists()
