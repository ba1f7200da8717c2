/*
 * The C record kernel: the same three functions as the pure-Python reference
 * (_records_py.py), which defines their behaviour; the tests require identical results.
 *
 * Walking the varint records of a v2 batch is the consumer's only per-record loop (DESIGN.md,
 * "The hot path, measured"), so it is done here: decode_columns() fills the flat buffers of
 * Arrow columns for all the batches of a fetch in one call, decode_records() builds
 * ConsumerRecord tuples, encode_records() writes a producer batch's records payload.
 * Malformed input raises ValueError; the Python callers add batch context.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef const uint8_t *ptr;

/* ---- reading --------------------------------------------------------------------------- */

/* Zigzag varint at *p (before end); 0 on success, -1 on truncation, -2 when too long. */
static inline int
read_varint(ptr *p, ptr end, int64_t *out)
{
    ptr q = *p;
    uint64_t v = 0;
    int shift = 0;
    if (q < end && *q < 0x80) {          /* most fields are one byte */
        v = *q++;
    } else {
        for (;;) {
            if (q >= end)
                return -1;
            uint8_t b = *q++;
            v |= (uint64_t)(b & 0x7F) << shift;
            if (b < 0x80)
                break;
            shift += 7;
            if (shift > 63)
                return -2;
        }
    }
    *p = q;
    *out = (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
    return 0;
}

/* A length-prefixed byte string into data and len; data NULL and len -1 for null. */
static inline const char *
read_bytes(ptr *p, ptr end, ptr *data, int64_t *len)
{
    int64_t n;
    int rc = read_varint(p, end, &n);
    if (rc)
        return rc == -1 ? "record truncated inside a varint" : "varint longer than 10 bytes";
    if (n < 0) {
        if (n != -1)
            return "invalid field length";
        *data = NULL;
        *len = -1;
        return NULL;
    }
    if (n > end - *p)
        return "field overruns its record";
    *data = *p;
    *len = n;
    *p += n;
    return NULL;
}

typedef struct {
    int64_t ts_delta, off_delta, n_headers;
    ptr key, value, headers;    /* headers: first header's position */
    int64_t key_len, value_len;
    ptr end;                    /* end of this record */
    int in_range;
} record;

/* Parse the record at *p; on success *p is the next record. Records whose offset delta is
 * outside [lo, hi) are skipped by their length prefix (in_range 0), as in the reference. */
static const char *
parse_record(ptr *p, ptr end, int64_t lo, int64_t hi, record *r)
{
    int64_t length, hk_len, hv_len;
    ptr q, hk, hv;
    const char *err;
    int rc = read_varint(p, end, &length);
    if (rc)
        return rc == -1 ? "record length truncated at the end of the payload"
                        : "varint longer than 10 bytes";
    if (length < 0 || length > end - *p)
        return "record overruns the batch payload";
    q = *p;
    r->end = q + length;
    *p = r->end;
    if (length < 1)
        return "record truncated: its fields overrun its bytes";
    q++;                            /* attributes: unused in v2 */
    if (read_varint(&q, r->end, &r->ts_delta) || read_varint(&q, r->end, &r->off_delta))
        return "record truncated: its fields overrun its bytes";
    r->in_range = r->off_delta >= lo && r->off_delta < hi;
    if (!r->in_range)
        return NULL;
    if ((err = read_bytes(&q, r->end, &r->key, &r->key_len)))
        return err;
    if ((err = read_bytes(&q, r->end, &r->value, &r->value_len)))
        return err;
    if (read_varint(&q, r->end, &r->n_headers))
        return "record truncated: its fields overrun its bytes";
    if (r->n_headers < 0)
        return "negative header count";
    r->headers = q;
    for (int64_t i = 0; i < r->n_headers; i++) {
        if ((err = read_bytes(&q, r->end, &hk, &hk_len)) ||
            (err = read_bytes(&q, r->end, &hv, &hv_len)))
            return err;
        if (hk == NULL)
            return "header key is null";
    }
    if (q != r->end)
        return "record declares more bytes than its fields take";
    return NULL;
}

/* One header of an already validated record. */
static inline void
next_header(ptr *q, ptr end, ptr *k, int64_t *klen, ptr *v, int64_t *vlen)
{
    read_bytes(q, end, k, klen);
    read_bytes(q, end, v, vlen);
}

static int
walk_error(const char *msg, int64_t base_offset, int prefix)
{
    if (prefix)
        PyErr_Format(PyExc_ValueError, "batch at offset %lld: %s", (long long)base_offset, msg);
    else
        PyErr_SetString(PyExc_ValueError, msg);
    return -1;
}

/* ---- decode_records -------------------------------------------------------------------- */

static PyObject *
bytes_or_none(ptr data, int64_t len)
{
    if (data == NULL)
        Py_RETURN_NONE;
    return PyBytes_FromStringAndSize((const char *)data, (Py_ssize_t)len);
}

static PyObject *
headers_list(const record *r)
{
    PyObject *list = PyList_New((Py_ssize_t)r->n_headers);
    ptr q = r->headers, k, v;
    int64_t klen, vlen;
    if (list == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < (Py_ssize_t)r->n_headers; i++) {
        next_header(&q, r->end, &k, &klen, &v, &vlen);
        PyObject *key = PyUnicode_DecodeUTF8((const char *)k, (Py_ssize_t)klen, "replace");
        PyObject *value = key ? bytes_or_none(v, vlen) : NULL;
        PyObject *pair = value ? PyTuple_Pack(2, key, value) : NULL;
        Py_XDECREF(key);
        Py_XDECREF(value);
        if (pair == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, i, pair);
    }
    return list;
}

static PyObject *
decode_records(PyObject *self, PyObject *args)
{
    Py_buffer buf;
    Py_ssize_t count;
    long long base_offset, base_ts, min_offset, lat = 0;
    PyObject *lat_obj, *topic, *partition, *out, *ts_type;
    PyTypeObject *cls;
    if (!PyArg_ParseTuple(args, "y*nLLOLOOO!O!", &buf, &count, &base_offset, &base_ts,
                          &lat_obj, &min_offset, &topic, &partition, &PyType_Type, &cls,
                          &PyList_Type, &out))
        return NULL;
    int has_lat = lat_obj != Py_None;
    if (has_lat && (lat = PyLong_AsLongLong(lat_obj)) == -1 && PyErr_Occurred())
        goto fail;
    if (!PyType_IsSubtype(cls, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "cls must be a tuple subclass (a NamedTuple)");
        goto fail;
    }
    ts_type = PyLong_FromLong(has_lat);
    ptr p = buf.buf, end = p + buf.len;
    for (Py_ssize_t i = 0; i < count; i++) {
        record r;
        const char *err = p >= end ? "batch holds fewer records than its count"
                                   : parse_record(&p, end, min_offset - base_offset,
                                                  INT64_MAX, &r);
        if (err) {
            walk_error(err, base_offset, 0);
            Py_DECREF(ts_type);
            goto fail;
        }
        if (!r.in_range)
            continue;
        PyObject *rec = cls->tp_alloc(cls, 8);
        if (rec == NULL) {
            Py_DECREF(ts_type);
            goto fail;
        }
        Py_INCREF(topic);
        Py_INCREF(partition);
        Py_INCREF(ts_type);
        PyTuple_SET_ITEM(rec, 0, topic);
        PyTuple_SET_ITEM(rec, 1, partition);
        PyTuple_SET_ITEM(rec, 2, PyLong_FromLongLong(base_offset + r.off_delta));
        PyTuple_SET_ITEM(rec, 3, PyLong_FromLongLong(has_lat ? lat : base_ts + r.ts_delta));
        PyTuple_SET_ITEM(rec, 4, ts_type);
        PyTuple_SET_ITEM(rec, 5, bytes_or_none(r.key, r.key_len));
        PyTuple_SET_ITEM(rec, 6, bytes_or_none(r.value, r.value_len));
        PyTuple_SET_ITEM(rec, 7, headers_list(&r));
        int bad = 0;
        for (int j = 0; j < 8; j++)
            bad |= PyTuple_GET_ITEM(rec, j) == NULL;
        if (bad || PyList_Append(out, rec)) {
            Py_DECREF(rec);
            Py_DECREF(ts_type);
            goto fail;
        }
        Py_DECREF(rec);
    }
    Py_DECREF(ts_type);
    if (p != end) {
        walk_error("bytes left after the batch's records", base_offset, 0);
        goto fail;
    }
    PyBuffer_Release(&buf);
    Py_RETURN_NONE;
fail:
    PyBuffer_Release(&buf);
    return NULL;
}

/* ---- decode_columns -------------------------------------------------------------------- */

/* An output buffer: a bytearray allocated at its upper bound, shrunk when done. Pages never
 * written are never touched, so the generous bound costs address space, not memory. */
typedef struct {
    PyObject *obj;
    char *data;
    Py_ssize_t used;
} outbuf;

enum { OFFSET, TIMESTAMP, TS_TYPE, K_OFF, K_VALID, K_DATA, V_OFF, V_VALID, V_DATA,
       H_OFF, HK_OFF, HK_VALID, HK_DATA, HV_OFF, HV_VALID, HV_DATA, N_BUFS };
static const char *BUF_NAMES[N_BUFS] = {
    "offset", "timestamp", "timestamp_type", "key_offsets", "key_valid", "key_data",
    "value_offsets", "value_valid", "value_data", "header_offsets", "header_key_offsets",
    "header_key_valid", "header_key_data", "header_value_offsets", "header_value_valid",
    "header_value_data"};

#define PUT(b, type, v) do { memcpy((b).data + (b).used, &(type){(v)}, sizeof(type)); \
                             (b).used += sizeof(type); } while (0)

/* Append one binary value (or null) to the offsets/valid/data triple starting at `o`. */
static inline int
put_binary(outbuf *o, ptr data, int64_t len, Py_ssize_t *nulls)
{
    if (data == NULL) {
        PUT(o[1], uint8_t, 0);
        (*nulls)++;
    } else {
        memcpy(o[2].data + o[2].used, data, (size_t)len);
        o[2].used += (Py_ssize_t)len;
        PUT(o[1], uint8_t, 1);
    }
    if (o[2].used > INT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "more than 2 GiB of data in one Arrow column");
        return -1;
    }
    PUT(o[0], int32_t, (int32_t)o[2].used);
    return 0;
}

static PyObject *
decode_columns(PyObject *self, PyObject *args)
{
    PyObject *segments, *result = NULL;
    long long lo, hi;
    int with_headers;
    Py_buffer *views = NULL;
    outbuf b[N_BUFS] = {{0}};
    Py_ssize_t n_seg, total_count = 0, total_bytes = 0, nulls[4] = {0, 0, 0, 0}, n = 0;
    Py_ssize_t got = 0;
    if (!PyArg_ParseTuple(args, "O!LLp", &PyList_Type, &segments, &lo, &hi, &with_headers))
        return NULL;
    n_seg = PyList_GET_SIZE(segments);
    views = PyMem_Calloc(n_seg ? n_seg : 1, sizeof(Py_buffer));
    if (views == NULL)
        return PyErr_NoMemory();
    for (; got < n_seg; got++) {
        PyObject *seg = PyList_GET_ITEM(segments, got);
        if (!PyTuple_Check(seg) || PyTuple_GET_SIZE(seg) != 5) {
            PyErr_SetString(PyExc_TypeError, "segments are (payload, count, base_offset, "
                            "base_timestamp, log_append_time) tuples");
            goto done;
        }
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(seg, 0), &views[got], PyBUF_SIMPLE))
            goto done;
        Py_ssize_t c = PyLong_AsSsize_t(PyTuple_GET_ITEM(seg, 1));
        if (c < 0) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "negative record count");
            got++;
            goto done;
        }
        total_count += c;
        total_bytes += views[got].len;
    }
    /* Upper bounds: records kept <= records counted; data <= payload bytes; every header
     * takes at least two bytes of payload. */
    Py_ssize_t max_headers = with_headers ? total_bytes / 2 : 0;
    Py_ssize_t sizes[N_BUFS] = {
        8 * total_count, 8 * total_count, 4 * total_count,
        4 * (total_count + 1), total_count, total_bytes,
        4 * (total_count + 1), total_count, total_bytes,
        4 * (total_count + 1), 4 * (max_headers + 1), max_headers, total_bytes,
        4 * (max_headers + 1), max_headers, total_bytes};
    for (int i = 0; i < N_BUFS; i++) {
        if (!with_headers && i >= H_OFF)
            break;
        if ((b[i].obj = PyByteArray_FromStringAndSize(NULL, sizes[i])) == NULL)
            goto done;
        b[i].data = PyByteArray_AS_STRING(b[i].obj);
    }
    static const int OFFSET_BUFS[5] = {K_OFF, V_OFF, H_OFF, HK_OFF, HV_OFF};
    for (int i = 0; i < 5; i++)                 /* every offsets buffer starts at 0 */
        if (b[OFFSET_BUFS[i]].obj)
            PUT(b[OFFSET_BUFS[i]], int32_t, 0);

    for (Py_ssize_t s = 0; s < n_seg; s++) {
        PyObject *seg = PyList_GET_ITEM(segments, s);
        Py_ssize_t count = PyLong_AsSsize_t(PyTuple_GET_ITEM(seg, 1));
        long long base_offset = PyLong_AsLongLong(PyTuple_GET_ITEM(seg, 2));
        long long base_ts = PyLong_AsLongLong(PyTuple_GET_ITEM(seg, 3));
        PyObject *lat_obj = PyTuple_GET_ITEM(seg, 4);
        long long lat = lat_obj == Py_None ? 0 : PyLong_AsLongLong(lat_obj);
        int has_lat = lat_obj != Py_None;
        if (PyErr_Occurred())
            goto done;
        ptr p = views[s].buf, end = p + views[s].len;
        Py_ssize_t n_headers_total = with_headers ? (b[HK_OFF].used / 4 - 1) : 0;
        for (Py_ssize_t i = 0; i < count; i++) {
            record r;
            const char *err = p >= end ? "batch holds fewer records than its count"
                                       : parse_record(&p, end, lo - base_offset,
                                                      hi - base_offset, &r);
            if (err) {
                walk_error(err, base_offset, 1);
                goto done;
            }
            if (!r.in_range)
                continue;
            PUT(b[OFFSET], int64_t, base_offset + r.off_delta);
            PUT(b[TIMESTAMP], int64_t, has_lat ? lat : base_ts + r.ts_delta);
            PUT(b[TS_TYPE], int32_t, has_lat);
            if (put_binary(&b[K_OFF], r.key, r.key_len, &nulls[0]) ||
                put_binary(&b[V_OFF], r.value, r.value_len, &nulls[1]))
                goto done;
            n++;
            if (!with_headers)
                continue;
            ptr q = r.headers, k, v;
            int64_t klen, vlen;
            for (int64_t h = 0; h < r.n_headers; h++) {
                next_header(&q, r.end, &k, &klen, &v, &vlen);
                if (put_binary(&b[HK_OFF], k, klen, &nulls[2]) ||
                    put_binary(&b[HV_OFF], v, vlen, &nulls[3]))
                    goto done;
            }
            n_headers_total += (Py_ssize_t)r.n_headers;
            PUT(b[H_OFF], int32_t, (int32_t)n_headers_total);
        }
        if (p != end) {
            walk_error("bytes left after the batch's records", base_offset, 1);
            goto done;
        }
    }

    result = PyDict_New();
    if (result == NULL)
        goto done;
    PyObject *nobj = PyLong_FromSsize_t(n);
    if (nobj == NULL || PyDict_SetItemString(result, "n", nobj)) {
        Py_XDECREF(nobj);
        Py_CLEAR(result);
        goto done;
    }
    Py_DECREF(nobj);
    static const char *NULL_NAMES[4] = {"key_nulls", "value_nulls", "header_key_nulls",
                                        "header_value_nulls"};
    for (int i = 0; i < N_BUFS; i++) {
        if (b[i].obj == NULL)
            continue;
        if (PyByteArray_Resize(b[i].obj, b[i].used) ||
            PyDict_SetItemString(result, BUF_NAMES[i], b[i].obj)) {
            Py_CLEAR(result);
            goto done;
        }
    }
    for (int i = 0; i < (with_headers ? 4 : 2); i++) {
        PyObject *v = PyLong_FromSsize_t(nulls[i]);
        if (v == NULL || PyDict_SetItemString(result, NULL_NAMES[i], v)) {
            Py_XDECREF(v);
            Py_CLEAR(result);
            goto done;
        }
        Py_DECREF(v);
    }
done:
    for (Py_ssize_t i = 0; i < got; i++)
        if (views[i].obj)
            PyBuffer_Release(&views[i]);
    PyMem_Free(views);
    for (int i = 0; i < N_BUFS; i++)
        Py_XDECREF(b[i].obj);
    return result;
}

/* ---- encode_records -------------------------------------------------------------------- */

typedef struct {
    char *data;
    Py_ssize_t len, cap;
} growbuf;

static int
grow(growbuf *g, Py_ssize_t extra)
{
    if (g->len + extra <= g->cap)
        return 0;
    Py_ssize_t cap = g->cap ? g->cap : 256;
    while (cap < g->len + extra)
        cap *= 2;
    char *data = PyMem_Realloc(g->data, (size_t)cap);
    if (data == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    g->data = data;
    g->cap = cap;
    return 0;
}

static int
put_varint(growbuf *g, int64_t v)
{
    uint64_t z = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    if (grow(g, 10))
        return -1;
    while (z >= 0x80) {
        g->data[g->len++] = (char)((z & 0x7F) | 0x80);
        z >>= 7;
    }
    g->data[g->len++] = (char)z;
    return 0;
}

static int
put_raw(growbuf *g, const void *data, Py_ssize_t len)
{
    if (put_varint(g, len) || grow(g, len))
        return -1;
    memcpy(g->data + g->len, data, (size_t)len);
    g->len += len;
    return 0;
}

/* A key or value: None is length -1, anything else must be bytes-like. */
static int
put_field(growbuf *g, PyObject *obj)
{
    Py_buffer view;
    if (obj == Py_None)
        return put_varint(g, -1);
    if (PyObject_GetBuffer(obj, &view, PyBUF_SIMPLE))
        return -1;
    int rc = put_raw(g, view.buf, view.len);
    PyBuffer_Release(&view);
    return rc;
}

static int
put_headers(growbuf *g, PyObject *headers)
{
    PyObject *seq = PySequence_Fast(headers, "headers must be a sequence of (str, bytes|None)");
    if (seq == NULL)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq), klen;
    int rc = put_varint(g, n);
    for (Py_ssize_t i = 0; i < n && rc == 0; i++) {
        PyObject *pair = PySequence_Fast_GET_ITEM(seq, i);
        PyObject *t = PyTuple_Check(pair) ? Py_NewRef(pair) : PySequence_Tuple(pair);
        if (t == NULL || PyTuple_GET_SIZE(t) != 2) {
            if (t != NULL)
                PyErr_SetString(PyExc_ValueError, "a header is a (key, value) pair");
            Py_XDECREF(t);
            rc = -1;
            break;
        }
        PyObject *hk = PyTuple_GET_ITEM(t, 0);
        const char *k = PyUnicode_Check(hk) ? PyUnicode_AsUTF8AndSize(hk, &klen) : NULL;
        if (k == NULL && !PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "header keys must be str");
        rc = k == NULL || put_raw(g, k, klen) || put_field(g, PyTuple_GET_ITEM(t, 1));
        Py_DECREF(t);
    }
    Py_DECREF(seq);
    return rc ? -1 : 0;
}

static PyObject *
encode_records(PyObject *self, PyObject *args)
{
    PyObject *records, *it, *item, *result = NULL;
    long long now, base_ts = 0, max_ts = 0;
    Py_ssize_t count = 0;
    growbuf out = {0}, body = {0};
    if (!PyArg_ParseTuple(args, "OL", &records, &now))
        return NULL;
    if ((it = PyObject_GetIter(records)) == NULL)
        return NULL;
    while ((item = PyIter_Next(it)) != NULL) {
        PyObject *seq = PySequence_Fast(item, "a record is (timestamp_ms, key, value, headers)");
        Py_DECREF(item);
        if (seq == NULL)
            goto done;
        if (PySequence_Fast_GET_SIZE(seq) != 4) {
            PyErr_SetString(PyExc_ValueError, "a record is (timestamp_ms, key, value, headers)");
            Py_DECREF(seq);
            goto done;
        }
        PyObject **f = PySequence_Fast_ITEMS(seq);
        long long ts = f[0] == Py_None ? now : PyLong_AsLongLong(f[0]);
        if (ts == -1 && PyErr_Occurred()) {
            Py_DECREF(seq);
            goto done;
        }
        if (count == 0)
            base_ts = max_ts = ts;
        else if (ts > max_ts)
            max_ts = ts;
        body.len = 0;
        int rc = grow(&body, 1);
        if (rc == 0) {
            body.data[body.len++] = 0;  /* attributes */
            rc = put_varint(&body, ts - base_ts) || put_varint(&body, count) ||
                 put_field(&body, f[1]) || put_field(&body, f[2]) || put_headers(&body, f[3]);
        }
        Py_DECREF(seq);
        if (rc || put_raw(&out, body.data, body.len))
            goto done;
        count++;
    }
    if (PyErr_Occurred())
        goto done;
    if (count == 0)
        result = Py_BuildValue("(y#nOO)", "", (Py_ssize_t)0, (Py_ssize_t)0, Py_None, Py_None);
    else
        result = Py_BuildValue("(y#nLL)", out.data, out.len, count, base_ts, max_ts);
done:
    Py_DECREF(it);
    PyMem_Free(out.data);
    PyMem_Free(body.data);
    return result;
}

/* ---- module ---------------------------------------------------------------------------- */

static PyMethodDef methods[] = {
    {"decode_records", decode_records, METH_VARARGS,
     "decode_records(payload, count, base_offset, base_timestamp, log_append_time, "
     "min_offset, topic, partition, cls, out): append one cls tuple per record to out."},
    {"decode_columns", decode_columns, METH_VARARGS,
     "decode_columns(segments, min_offset, max_offset, with_headers) -> dict of buffers."},
    {"encode_records", encode_records, METH_VARARGS,
     "encode_records(records, now_ms) -> (payload, count, base_timestamp, max_timestamp)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "minilog.connector._records_c",
    "C record kernel of minilog; see _records_py.py for the reference it must match.",
    -1, methods,
};

PyMODINIT_FUNC
PyInit__records_c(void)
{
    return PyModule_Create(&module);
}
