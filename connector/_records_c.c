/*
 * The C record kernel: the same three functions as the pure-Python reference
 * (_records_py.py), which defines their behaviour; the tests require identical results.
 *
 * Walking the varint records of a v2 batch is the consumer's only per-record loop
 * (docs/ARCHITECTURE.md, "The record kernel"), so it is done here: decode_columns() fills the
 * flat buffers of Arrow columns for all the batches of a fetch in one call, decode_records() builds
 * ConsumerRecord tuples, encode_records() writes a producer batch's records payload.
 * Malformed input raises ValueError; the Python callers add batch context.
 *
 * crc32c() is extra: the record batch checksum, which the broker checks on every produced
 * batch and the consumer on every fetched one. Its reference is the `crc32c` package, which
 * `_kernel.py` falls back to with the Python kernel.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef const uint8_t *ptr;

#define TRUNCATED "record truncated: its fields overrun its bytes"

/* ---- reading --------------------------------------------------------------------------- */

/* Zigzag varint at *p (before end); 0 on success, -1 on truncation, -2 when too long. */
static inline int read_varint(ptr *p, ptr end, int64_t *out)
{
    ptr q = *p;
    uint64_t v = 0, b = 0x80;
    for (int shift = 0; b >= 0x80; shift += 7) {    /* one round for most fields */
        if (q >= end || shift > 63)
            return q >= end ? -1 : -2;
        b = *q++;
        v |= (b & 0x7F) << shift;
    }
    *p = q;
    *out = (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
    return 0;
}

/* A length-prefixed byte string into data and len; data NULL and len -1 for null. */
static inline const char *read_bytes(ptr *p, ptr end, ptr *data, int64_t *len)
{
    int rc = read_varint(p, end, len);
    if (rc)
        return rc == -1 ? TRUNCATED : "varint longer than 10 bytes";
    if (*len < -1)
        return "invalid field length";
    if (*len > end - *p)
        return "field overruns its record";
    *data = *len < 0 ? NULL : *p;
    *p += *len < 0 ? 0 : *len;
    return NULL;
}

typedef struct {
    int64_t ts_delta, off_delta, n_headers, key_len, value_len;
    ptr key, value, headers, end;   /* headers: the first header; end: the record's end */
    int in_range;
} record;

/* Parse the record at *p; on success *p is the next record. Records whose offset delta is
 * outside [lo, hi) are skipped by their length prefix (in_range 0), as in the reference. */
static const char *parse_record(ptr *p, ptr end, int64_t lo, int64_t hi, record *r)
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
    r->end = *p = q + length;
    if (length < 1)
        return TRUNCATED;
    q++;                            /* attributes: unused in v2 */
    if (read_varint(&q, r->end, &r->ts_delta) || read_varint(&q, r->end, &r->off_delta))
        return TRUNCATED;
    r->in_range = r->off_delta >= lo && r->off_delta < hi;
    if (!r->in_range)
        return NULL;
    if ((err = read_bytes(&q, r->end, &r->key, &r->key_len)) ||
        (err = read_bytes(&q, r->end, &r->value, &r->value_len)))
        return err;
    if (read_varint(&q, r->end, &r->n_headers))
        return TRUNCATED;
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
    return q == r->end ? NULL : "record declares more bytes than its fields take";
}

/* Parse the next record of a batch, raising ValueError on bad input; `prefix` adds the
 * batch's offset to the message (decode_records' caller adds it itself). */
static int next_record(ptr *p, ptr end, int64_t lo, int64_t hi, record *r, long long base,
                       int prefix)
{
    const char *err = *p >= end ? "batch holds fewer records than its count"
                                : parse_record(p, end, lo, hi, r);
    if (err && prefix)
        PyErr_Format(PyExc_ValueError, "batch at offset %lld: %s", base, err);
    else if (err)
        PyErr_SetString(PyExc_ValueError, err);
    return err ? -1 : 0;
}

/* After the batch's `count` records, its payload must be consumed exactly. */
static int check_end(ptr p, ptr end, long long base, int prefix)
{
    if (p != end && prefix)
        PyErr_Format(PyExc_ValueError, "batch at offset %lld: %zd bytes left after the "
                     "batch's records", base, (Py_ssize_t)(end - p));
    else if (p != end)
        PyErr_Format(PyExc_ValueError, "%zd bytes left after the batch's records",
                     (Py_ssize_t)(end - p));
    return p == end ? 0 : -1;
}

/* ---- decode_records -------------------------------------------------------------------- */

static PyObject *bytes_or_none(ptr data, int64_t len)
{
    return data ? PyBytes_FromStringAndSize((const char *)data, len) : Py_NewRef(Py_None);
}

static PyObject *headers_list(const record *r)
{
    PyObject *list = PyList_New((Py_ssize_t)r->n_headers);
    ptr q = r->headers, k, v;
    int64_t klen, vlen;
    for (Py_ssize_t i = 0; list != NULL && i < (Py_ssize_t)r->n_headers; i++) {
        read_bytes(&q, r->end, &k, &klen);      /* validated by parse_record */
        read_bytes(&q, r->end, &v, &vlen);
        PyObject *key = PyUnicode_DecodeUTF8((const char *)k, (Py_ssize_t)klen, "replace");
        PyObject *value = key ? bytes_or_none(v, vlen) : NULL;
        PyObject *pair = value ? PyTuple_Pack(2, key, value) : NULL;
        Py_XDECREF(key);
        Py_XDECREF(value);
        PyList_SET_ITEM(list, i, pair);     /* a list with a NULL item deallocates fine */
        if (pair == NULL)
            Py_CLEAR(list);
    }
    return list;
}

static PyObject *decode_records(PyObject *self, PyObject *args)
{
    Py_buffer buf;
    Py_ssize_t count;
    long long base_offset, base_ts, min_offset, lat = 0;
    PyObject *lat_obj, *topic, *partition, *out, *no_headers = Py_None, *ts_type = NULL;
    PyObject *result = NULL;
    PyTypeObject *cls;
    if (!PyArg_ParseTuple(args, "y*nLLOLOOO!O!|O", &buf, &count, &base_offset, &base_ts,
                          &lat_obj, &min_offset, &topic, &partition, &PyType_Type, &cls,
                          &PyList_Type, &out, &no_headers))
        return NULL;
    /* A record holding only atomic objects and the shared `no_headers` can be in no reference
     * cycle, so the cyclic GC need not track it: no collection ever walks the records of a
     * fetch (CPython untracks such plain tuples too, but only when a collection finds them,
     * and never a tuple subclass). Records with headers hold a list and stay tracked. */
    int shared = no_headers != Py_None;
    int untrack = shared && (PyUnicode_CheckExact(topic) || topic == Py_None) &&
                  (PyLong_CheckExact(partition) || partition == Py_None);
    int has_lat = lat_obj != Py_None;
    if (has_lat && (lat = PyLong_AsLongLong(lat_obj)) == -1 && PyErr_Occurred())
        goto done;
    if (!PyType_IsSubtype(cls, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "cls must be a tuple subclass (a NamedTuple)");
        goto done;
    }
    ts_type = PyLong_FromLong(has_lat);
    ptr p = buf.buf, end = p + buf.len;
    for (Py_ssize_t i = 0; i < count; i++) {
        record r;
        if (next_record(&p, end, min_offset - base_offset, INT64_MAX, &r, base_offset, 0))
            goto done;
        if (!r.in_range)
            continue;
        /* A NamedTuple is a tuple subclass without a __dict__: fill its slots directly. */
        PyObject *rec = cls->tp_alloc(cls, 8);
        if (rec == NULL)
            goto done;
        PyObject *items[8] = {
            Py_NewRef(topic), Py_NewRef(partition),
            PyLong_FromLongLong(base_offset + r.off_delta),
            PyLong_FromLongLong(has_lat ? lat : base_ts + r.ts_delta), Py_NewRef(ts_type),
            bytes_or_none(r.key, r.key_len), bytes_or_none(r.value, r.value_len),
            r.n_headers == 0 && shared ? Py_NewRef(no_headers) : headers_list(&r)};
        int bad = 0;
        for (int j = 0; j < 8; j++)
            bad |= (PyTuple_SET_ITEM(rec, j, items[j]), items[j] == NULL);
        if (!bad && untrack && r.n_headers == 0)
            PyObject_GC_UnTrack(rec);
        bad = bad || PyList_Append(out, rec);
        Py_DECREF(rec);     /* frees the items too, NULLs included, when it was bad */
        if (bad)
            goto done;
    }
    if (check_end(p, end, base_offset, 0) == 0)
        result = Py_NewRef(Py_None);
done:
    Py_XDECREF(ts_type);
    PyBuffer_Release(&buf);
    return result;
}

/* ---- decode_columns -------------------------------------------------------------------- */

/* An output buffer: a bytearray allocated at its upper bound, shrunk when done. Pages never
 * written are never touched, so the generous bound costs address space, not memory. */
typedef struct { PyObject *obj; char *data; Py_ssize_t used; } outbuf;

enum { OFFSET, TIMESTAMP, TS_TYPE, K_OFF, K_VALID, K_DATA, V_OFF, V_VALID, V_DATA,
       H_OFF, HK_OFF, HK_VALID, HK_DATA, HV_OFF, HV_VALID, HV_DATA, N_BUFS };
static const char *BUF_NAMES[N_BUFS] = {
    "offset", "timestamp", "timestamp_type", "key_offsets", "key_valid", "key_data",
    "value_offsets", "value_valid", "value_data", "header_offsets", "header_key_offsets",
    "header_key_valid", "header_key_data", "header_value_offsets", "header_value_valid",
    "header_value_data"};
static const char *NULL_NAMES[4] = {"key_nulls", "value_nulls", "header_key_nulls",
                                    "header_value_nulls"};

#define PUT(b, type, v) do { memcpy((b).data + (b).used, &(type){(v)}, sizeof(type)); \
                             (b).used += sizeof(type); } while (0)

/* Append one binary value (or null) to the offsets/valid/data triple starting at `o`. */
static inline int put_binary(outbuf *o, ptr data, int64_t len, Py_ssize_t *nulls)
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

/* d[key] = v, stealing v; -1 on error. */
static int set_steal(PyObject *d, const char *key, PyObject *v)
{
    int rc = v == NULL ? -1 : PyDict_SetItemString(d, key, v);
    Py_XDECREF(v);
    return rc;
}

static PyObject *decode_columns(PyObject *self, PyObject *args)
{
    PyObject *segments, *result = NULL;
    long long lo, hi;
    int with_headers;
    outbuf b[N_BUFS] = {{0}};
    Py_ssize_t n_seg, got = 0, max_records = 0, total_bytes = 0, n = 0, n_headers = 0;
    Py_ssize_t nulls[4] = {0, 0, 0, 0};
    if (!PyArg_ParseTuple(args, "O!LLp", &PyList_Type, &segments, &lo, &hi, &with_headers))
        return NULL;
    n_seg = PyList_GET_SIZE(segments);
    Py_buffer *views = PyMem_Calloc(n_seg ? n_seg : 1, sizeof(Py_buffer));
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
        /* Every record takes at least 7 bytes: a bound that a bogus count cannot inflate. */
        max_records += views[got].len / 7 + 1;
        total_bytes += views[got].len;
    }
    /* Upper bounds: data <= payload bytes; every header takes at least two bytes. */
    Py_ssize_t max_h = with_headers ? total_bytes / 2 : 0, r1 = max_records + 1;
    Py_ssize_t sizes[N_BUFS] = {
        8 * max_records, 8 * max_records, 4 * max_records,
        4 * r1, max_records, total_bytes, 4 * r1, max_records, total_bytes,
        4 * r1, 4 * (max_h + 1), max_h, total_bytes, 4 * (max_h + 1), max_h, total_bytes};
    for (int i = 0; i < (with_headers ? N_BUFS : H_OFF); i++) {
        if ((b[i].obj = PyByteArray_FromStringAndSize(NULL, sizes[i])) == NULL)
            goto done;
        b[i].data = PyByteArray_AS_STRING(b[i].obj);
        if (i == K_OFF || i == V_OFF || i == H_OFF || i == HK_OFF || i == HV_OFF)
            PUT(b[i], int32_t, 0);          /* every offsets buffer starts at 0 */
    }
    for (Py_ssize_t s = 0; s < n_seg; s++) {
        PyObject *seg = PyList_GET_ITEM(segments, s), *lat_obj = PyTuple_GET_ITEM(seg, 4);
        Py_ssize_t count = PyLong_AsSsize_t(PyTuple_GET_ITEM(seg, 1));
        long long base_offset = PyLong_AsLongLong(PyTuple_GET_ITEM(seg, 2));
        long long base_ts = PyLong_AsLongLong(PyTuple_GET_ITEM(seg, 3));
        int has_lat = lat_obj != Py_None;
        long long lat = has_lat ? PyLong_AsLongLong(lat_obj) : 0;
        if (PyErr_Occurred())
            goto done;
        ptr p = views[s].buf, end = p + views[s].len;
        for (Py_ssize_t i = 0; i < count; i++) {
            record r;
            if (next_record(&p, end, lo - base_offset, hi - base_offset, &r, base_offset, 1))
                goto done;
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
                read_bytes(&q, r.end, &k, &klen);      /* validated by parse_record */
                read_bytes(&q, r.end, &v, &vlen);
                if (put_binary(&b[HK_OFF], k, klen, &nulls[2]) ||
                    put_binary(&b[HV_OFF], v, vlen, &nulls[3]))
                    goto done;
            }
            n_headers += (Py_ssize_t)r.n_headers;   /* <= max_h, which the check above bounds */
            PUT(b[H_OFF], int32_t, (int32_t)n_headers);
        }
        if (check_end(p, end, base_offset, 1))
            goto done;
    }
    if ((result = PyDict_New()) == NULL || set_steal(result, "n", PyLong_FromSsize_t(n)))
        goto fail;
    for (int i = 0; i < N_BUFS; i++)
        if (b[i].obj && (PyByteArray_Resize(b[i].obj, b[i].used) ||
                         PyDict_SetItemString(result, BUF_NAMES[i], b[i].obj)))
            goto fail;
    for (int i = 0; i < (with_headers ? 4 : 2); i++)
        if (set_steal(result, NULL_NAMES[i], PyLong_FromSsize_t(nulls[i])))
            goto fail;
    goto done;
fail:
    Py_CLEAR(result);
done:
    for (Py_ssize_t i = 0; i < got; i++)
        PyBuffer_Release(&views[i]);
    PyMem_Free(views);
    for (int i = 0; i < N_BUFS; i++)
        Py_XDECREF(b[i].obj);
    return result;
}

/* ---- encode_records -------------------------------------------------------------------- */

typedef struct { char *data; Py_ssize_t len, cap; } growbuf;
#define RECORD_SHAPE "a record is (timestamp_ms, key, value, headers)"

static int grow(growbuf *g, Py_ssize_t extra)
{
    if (g->len + extra <= g->cap)
        return 0;
    Py_ssize_t cap = g->cap ? g->cap : 256;
    while (cap < g->len + extra)
        cap *= 2;
    char *data = PyMem_Realloc(g->data, (size_t)cap);
    if (data == NULL)
        return PyErr_NoMemory(), -1;
    g->data = data, g->cap = cap;
    return 0;
}

static int put_varint(growbuf *g, int64_t v)
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

static int put_raw(growbuf *g, const void *data, Py_ssize_t len)
{
    if (put_varint(g, len) || grow(g, len))
        return -1;
    memcpy(g->data + g->len, data, (size_t)len);
    g->len += len;
    return 0;
}

/* A key or value: None is length -1, anything else must be bytes-like. */
static int put_field(growbuf *g, PyObject *obj)
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

static int put_headers(growbuf *g, PyObject *headers)
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

static PyObject *encode_records(PyObject *self, PyObject *args)
{
    PyObject *records, *it, *item, *result = NULL;
    long long now, base_ts = 0, max_ts = 0;
    Py_ssize_t count = 0;
    growbuf out = {0}, body = {0};
    if (!PyArg_ParseTuple(args, "OL", &records, &now) || (it = PyObject_GetIter(records)) == NULL)
        return NULL;
    while ((item = PyIter_Next(it)) != NULL) {
        PyObject *seq = PySequence_Fast(item, RECORD_SHAPE);
        Py_DECREF(item);
        if (seq != NULL && PySequence_Fast_GET_SIZE(seq) != 4) {
            PyErr_SetString(PyExc_ValueError, RECORD_SHAPE);
            Py_CLEAR(seq);
        }
        if (seq == NULL)
            goto done;
        PyObject **f = PySequence_Fast_ITEMS(seq);
        long long ts = f[0] == Py_None ? now : PyLong_AsLongLong(f[0]);
        int rc = ts == -1 && PyErr_Occurred();
        if (count == 0)
            base_ts = max_ts = ts;
        else if (ts > max_ts)
            max_ts = ts;
        body.len = 0;  /* first the attributes: int8 0 (unused in v2), the same byte as varint 0 */
        rc = rc || put_varint(&body, 0) || put_varint(&body, ts - base_ts) ||
             put_varint(&body, count) || put_field(&body, f[1]) || put_field(&body, f[2]) ||
             put_headers(&body, f[3]);
        Py_DECREF(seq);
        if (rc || put_raw(&out, body.data, body.len))
            goto done;
        count++;
    }
    if (!PyErr_Occurred() && count == 0)
        result = Py_BuildValue("(y#nOO)", "", (Py_ssize_t)0, (Py_ssize_t)0, Py_None, Py_None);
    else if (!PyErr_Occurred())
        result = Py_BuildValue("(y#nLL)", out.data, out.len, count, base_ts, max_ts);
done:
    Py_DECREF(it);
    PyMem_Free(out.data);
    PyMem_Free(body.data);
    return result;
}

/*
 * encode_values(offsets, data, validity, wide, start, count, timestamp): the records payload of
 * `count` keyless, headerless records whose values are rows [start, start + count) of an Arrow
 * binary column given by its buffers (`offsets`: int32, or int64 when `wide`; `validity`: the
 * null bitmap or None), all stamped `timestamp`: what encode_records makes of the same values,
 * with no Python object per record (Producer.send_arrow's path for a topic's value column).
 * Returns (payload, count, timestamp, timestamp).
 */
static PyObject *encode_values(PyObject *self, PyObject *args)
{
    Py_buffer offs, data, valid = {0};
    PyObject *validity, *result = NULL;
    int wide;
    Py_ssize_t start, count;
    long long ts;
    if (!PyArg_ParseTuple(args, "y*y*OpnnL", &offs, &data, &validity, &wide, &start, &count,
                          &ts))
        return NULL;
    growbuf out = {0};
    int has_valid = validity != Py_None;
    Py_ssize_t width = wide ? 8 : 4;
    if (has_valid && PyObject_GetBuffer(validity, &valid, PyBUF_SIMPLE))
        goto done;
    if (start < 0 || count < 0 || (start + count + 1) * width > offs.len ||
        (has_valid && (start + count + 7) / 8 > valid.len)) {
        PyErr_SetString(PyExc_ValueError, "rows outside the column's buffers");
        goto done;
    }
    const uint8_t *o = offs.buf, *d = data.buf, *bits = valid.buf;
    for (Py_ssize_t i = 0; i < count; i++) {
        Py_ssize_t row = start + i;
        int64_t a, b;
        if (wide) {
            memcpy(&a, o + row * 8, 8);
            memcpy(&b, o + row * 8 + 8, 8);
        } else {
            int32_t a32, b32;
            memcpy(&a32, o + row * 4, 4);
            memcpy(&b32, o + row * 4 + 4, 4);
            a = a32, b = b32;
        }
        int null = has_valid && !((bits[row >> 3] >> (row & 7)) & 1);
        if (!null && (a < 0 || b < a || b > data.len)) {
            PyErr_SetString(PyExc_ValueError, "a value outside the column's data buffer");
            goto done;
        }
        int64_t len = null ? -1 : b - a;
        /* attributes, timestamp delta 0, offset delta, key null, value, no headers */
        uint64_t zi = (uint64_t)i << 1, zl = ((uint64_t)len << 1) ^ (uint64_t)(len >> 63);
        int64_t body = 6 + (null ? 0 : len);
        for (uint64_t z = zi; z >= 0x80; z >>= 7) body++;
        for (uint64_t z = zl; z >= 0x80; z >>= 7) body++;
        if (put_varint(&out, body) || grow(&out, body))
            goto done;
        char *w = out.data + out.len;
        *w++ = 0;
        *w++ = 0;
        for (; zi >= 0x80; zi >>= 7) *w++ = (char)((zi & 0x7F) | 0x80);
        *w++ = (char)zi;
        *w++ = 1;
        for (; zl >= 0x80; zl >>= 7) *w++ = (char)((zl & 0x7F) | 0x80);
        *w++ = (char)zl;
        if (!null) {
            memcpy(w, d + a, (size_t)len);
            w += len;
        }
        *w++ = 0;
        out.len = w - out.data;
    }
    result = Py_BuildValue("(y#nLL)", out.data ? out.data : "", out.len, count, ts, ts);
done:
    PyBuffer_Release(&offs);
    PyBuffer_Release(&data);
    if (has_valid && valid.obj != NULL)
        PyBuffer_Release(&valid);
    PyMem_Free(out.data);
    return result;
}

/* ---- crc32c --------------------------------------------------------------------------- */

/*
 * CRC32C (Castagnoli; reflected polynomial 0x82F63B78), the checksum of record batches.
 * crc32c(data, value) continues `value`, the CRC of the bytes before `data`, with the same
 * results as the `crc32c` package's function (batch.py's reference until this was added).
 *
 * The code works on the register, the CRC before its final inversion:
 * crc32c(data, value) == ~reg(~value, data). The register is linear in both of its inputs:
 *     reg(r, A || B) == reg(r, A) * x^(8 |B|) mod P  ^  reg(0, B),
 * so the parts of a block can be run independently, from register 0, and combined by
 * "shifting" each through the bytes after it: a multiplication by the constant x^(8n) mod P,
 * linear too, done as four lookups in a 4 x 256 table built at import.
 *
 * Three implementations; crc32c() runs the best one the CPU has (checked at run time: the
 * module is built without -msse4.2 or -mpclmul and imports everywhere):
 * - "sse4.2+pclmul" (x86-64 with PCLMULQDQ, from 64 bytes): folds the buffer in four 16-byte
 *   lanes, each moved 64 bytes on per round by two carry-less multiplications with
 *   x^(8 * 64 + 64) and x^(8 * 64) mod P, then folds the lanes into 16 bytes worth the same
 *   mod P, which two crc32 instructions reduce.
 * - "sse4.2" (x86-64 without PCLMULQDQ): three crc32 streams over the three thirds of each
 *   block (blocks of 3 x 2048 bytes, then of 3 x 256), each stream starting from register 0
 *   and each block's registers combined into the running one with shift tables.
 * - "portable": table-driven, slicing by 8.
 * The x86 ones run one crc32 stream for short buffers and for the bytes left at the end.
 *
 * Measured on this project's AMD EPYC machine (a Zen 1 as the VM reports it), 1 MiB buffers:
 * sse4.2+pclmul ~10 GB/s, sse4.2 ~6, portable ~1.5, and the `crc32c` package ~6.4 (it runs
 * three crc32 streams too, Mark Adler's way). There three crc32 streams are only ~1.2 times
 * as fast as one (~5 GB/s in C): its crc32 instruction does not issue every cycle, as the
 * three-stream design assumes (most Intel and recent AMD cores). Mixing crc32 streams into
 * the folding loop (1 to 4 words per stream per 64-byte round) measured 3-10% slower there
 * than folding alone; it may pay on cores whose crc32 issues every cycle.
 */
#define CRC_POLY 0x82F63B78u
#define CRC_LONG 2048                   /* bytes per stream in a long block */
#define CRC_SHORT 256                   /* ... in a short one */
#define CRC_FOLD_MIN 64                 /* shorter buffers run one crc32 stream instead */
#define CRC_GIL_FREE (64 * 1024)        /* buffers at least this long release the GIL */

typedef uint32_t (*crc_fn)(uint32_t reg, const uint8_t *p, size_t n);

static uint32_t crc_table[8][256];      /* crc_table[k][b]: register of byte b and k zeros */

static inline uint32_t load_le32(const uint8_t *p)      /* any alignment, any byte order */
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint32_t crc32c_portable(uint32_t r, const uint8_t *p, size_t n)
{
    for (; n >= 8; n -= 8, p += 8) {
        uint32_t lo = r ^ load_le32(p), hi = load_le32(p + 4);
        r = crc_table[7][lo & 0xff] ^ crc_table[6][(lo >> 8) & 0xff] ^
            crc_table[5][(lo >> 16) & 0xff] ^ crc_table[4][lo >> 24] ^
            crc_table[3][hi & 0xff] ^ crc_table[2][(hi >> 8) & 0xff] ^
            crc_table[1][(hi >> 16) & 0xff] ^ crc_table[0][hi >> 24];
    }
    for (; n; n--)
        r = (r >> 8) ^ crc_table[0][(r ^ *p++) & 0xff];
    return r;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define CRC_X86 1
#include <nmmintrin.h>
#include <wmmintrin.h>

#define CRC_SSE42 __attribute__((target("sse4.2")))
#define CRC_PCLMUL __attribute__((target("sse4.2,pclmul")))

typedef uint32_t crc_shift_table[4][256];
static crc_shift_table crc_shift_long, crc_shift_short;
static uint64_t crc_fold64[2], crc_fold16[2];   /* fold constants, low and high halves */

/* a * b mod P, both in the reflected order of the register (bit 31 holds x^0). */
static uint32_t crc_multmodp(uint32_t a, uint32_t b)
{
    uint32_t p = 0;
    for (uint32_t m = 1u << 31; m; m >>= 1) {
        if (a & m)
            p ^= b;
        b = b & 1 ? (b >> 1) ^ CRC_POLY : b >> 1;      /* b *= x */
    }
    return p;
}

static uint32_t crc_xpow(uint64_t e)    /* x^e mod P */
{
    uint32_t result = 1u << 31, sq = 1u << 30;          /* x^0, x^1 */
    for (; e; e >>= 1, sq = crc_multmodp(sq, sq))
        if (e & 1)
            result = crc_multmodp(result, sq);
    return result;
}

/* The table that multiplies a register by x^(8n) mod P: shifts it through n zero bytes. */
static void crc_shift_init(crc_shift_table t, uint64_t n)
{
    uint32_t x8n = crc_xpow(8 * n);
    for (int k = 0; k < 4; k++) {
        t[k][0] = 0;
        for (int bit = 1; bit < 256; bit <<= 1) {       /* linear: xor the images of bits */
            uint32_t image = crc_multmodp(x8n, (uint32_t)bit << (8 * k));
            for (int b = 0; b < bit; b++)
                t[k][bit + b] = t[k][b] ^ image;
        }
    }
}

/* Constants to fold a 16-byte lane d bytes further on. The lane's first 8 bytes (its low
 * half) H are worth H * x^64, its last 8 L are worth L; d bytes further on they are worth
 * H * x^(8d + 64) + L * x^(8d), congruent mod P to H * (x^(8d + 64) mod P) + L * (x^(8d) mod P),
 * at most 96 bits: a lane again. In the reflected order (a 64-bit half's bit i holds x^(63-i))
 * the carry-less product of two halves, bit k holding x^(126-k), reads as a 128-bit lane
 * (bit k holding x^(127-k)) times x, so each constant carries one x less. A 32-bit register
 * value sits in the top half of its 64 bits. */
static void crc_fold_init(uint64_t k[2], unsigned d)
{
    k[0] = (uint64_t)crc_xpow(8 * d + 63) << 32;
    k[1] = (uint64_t)crc_xpow(8 * d - 1) << 32;
}

static inline uint32_t crc_shift(const crc_shift_table t, uint32_t r)
{
    return t[0][r & 0xff] ^ t[1][(r >> 8) & 0xff] ^ t[2][(r >> 16) & 0xff] ^ t[3][r >> 24];
}

CRC_SSE42 static inline uint64_t crc_word(uint64_t r, const uint8_t *p)
{
    uint64_t w;
    memcpy(&w, p, 8);
    return _mm_crc32_u64(r, w);
}

/* Whole blocks of 3 x len bytes: three streams from register 0, one per third, each block
 * folded into r as r * x^(8 * 3len) ^ block. The streams do not wait for the fold, so the
 * table lookups overlap the next block's crc32 instructions. */
CRC_SSE42 static inline uint32_t crc_blocks(uint32_t r, const uint8_t **pp, size_t *np,
                                            const size_t len, const crc_shift_table t)
{
    const uint8_t *p = *pp;
    size_t n = *np;
    for (; n >= 3 * len; n -= 3 * len, p += 2 * len) {
        uint64_t c0 = 0, c1 = 0, c2 = 0;
        for (const uint8_t *end = p + len; p < end; p += 8) {
            c0 = crc_word(c0, p);
            c1 = crc_word(c1, p + len);
            c2 = crc_word(c2, p + 2 * len);
        }
        r = crc_shift(t, crc_shift(t, crc_shift(t, r) ^ (uint32_t)c0) ^ (uint32_t)c1) ^
            (uint32_t)c2;
    }
    *pp = p, *np = n;
    return r;
}

CRC_SSE42 static inline uint32_t crc_align(uint32_t r, const uint8_t **pp, size_t *np)
{
    for (; *np && ((uintptr_t)*pp & 7); (*np)--)        /* align the 8-byte loads */
        r = _mm_crc32_u8(r, *(*pp)++);
    return r;
}

CRC_SSE42 static inline uint32_t crc_finish(uint32_t r, const uint8_t *p, size_t n)
{
    if (n >= 3 * CRC_SHORT)
        r = crc_blocks(r, &p, &n, CRC_SHORT, crc_shift_short);
    uint64_t r64 = r;
    for (; n >= 8; n -= 8, p += 8)
        r64 = crc_word(r64, p);
    for (r = (uint32_t)r64; n; n--)
        r = _mm_crc32_u8(r, *p++);
    return r;
}

CRC_SSE42 static uint32_t crc32c_sse42(uint32_t r, const uint8_t *p, size_t n)
{
    r = crc_align(r, &p, &n);
    if (n >= 3 * CRC_LONG)
        r = crc_blocks(r, &p, &n, CRC_LONG, crc_shift_long);
    return crc_finish(r, p, n);
}

#define LOAD128(p) _mm_loadu_si128((const __m128i *)(p))

/* x moved `k`'s distance on (see crc_fold_init), onto the lane found there. */
CRC_PCLMUL static inline __m128i crc_fold(__m128i x, __m128i k, __m128i next)
{
    return _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00),
                                       _mm_clmulepi64_si128(x, k, 0x11)), next);
}

CRC_PCLMUL static uint32_t crc32c_pclmul(uint32_t r, const uint8_t *p, size_t n)
{
    if (n < CRC_FOLD_MIN) {
        r = crc_align(r, &p, &n);
        return crc_finish(r, p, n);
    }
    const __m128i k64 = _mm_set_epi64x((long long)crc_fold64[1], (long long)crc_fold64[0]);
    const __m128i k16 = _mm_set_epi64x((long long)crc_fold16[1], (long long)crc_fold16[0]);
    /* The register enters as the first four bytes (xor): reg(r, M) == reg(0, M ^ r). */
    __m128i x0 = _mm_xor_si128(LOAD128(p), _mm_cvtsi32_si128((int)r)),
            x1 = LOAD128(p + 16), x2 = LOAD128(p + 32), x3 = LOAD128(p + 48);
    for (p += 64, n -= 64; n >= 64; p += 64, n -= 64) {
        x0 = crc_fold(x0, k64, LOAD128(p));
        x1 = crc_fold(x1, k64, LOAD128(p + 16));
        x2 = crc_fold(x2, k64, LOAD128(p + 32));
        x3 = crc_fold(x3, k64, LOAD128(p + 48));
    }
    x0 = crc_fold(crc_fold(crc_fold(x0, k16, x1), k16, x2), k16, x3);
    for (; n >= 16; p += 16, n -= 16)
        x0 = crc_fold(x0, k16, LOAD128(p));
    /* 16 bytes worth what all before them were, mod P: their register is the CRC's. */
    r = (uint32_t)_mm_crc32_u64(_mm_crc32_u64(0, (uint64_t)_mm_cvtsi128_si64(x0)),
                                (uint64_t)_mm_extract_epi64(x0, 1));
    return crc_finish(r, p, n);
}
#endif

static const char *const CRC_NAMES[3] = {"portable", "sse4.2", "sse4.2+pclmul"};
static crc_fn crc_impls[3] = {crc32c_portable, NULL, NULL};     /* those this CPU runs */
static int crc_best;                                            /* crc32c()'s, in crc_impls */

static void crc_init(void)
{
    for (uint32_t b = 0; b < 256; b++) {
        uint32_t r = b;
        for (int k = 0; k < 8; k++)
            r = r & 1 ? (r >> 1) ^ CRC_POLY : r >> 1;
        crc_table[0][b] = r;
    }
    for (int k = 1; k < 8; k++)
        for (int b = 0; b < 256; b++)
            crc_table[k][b] = (crc_table[k - 1][b] >> 8) ^ crc_table[0][crc_table[k - 1][b] & 0xff];
#ifdef CRC_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("sse4.2")) {
        crc_shift_init(crc_shift_long, CRC_LONG);
        crc_shift_init(crc_shift_short, CRC_SHORT);
        crc_impls[1] = crc32c_sse42;
        crc_best = 1;
        if (__builtin_cpu_supports("pclmul")) {
            crc_fold_init(crc_fold64, 64);
            crc_fold_init(crc_fold16, 16);
            crc_impls[2] = crc32c_pclmul;
            crc_best = 2;
        }
    }
#endif
}

/* crc32c(data, value=0), with data and value positional or by keyword, as in the package. */
static PyObject *crc32c(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                        PyObject *kwnames)
{
    static const char *names[2] = {"data", "value"};
    PyObject *arg[2] = {nargs > 0 ? args[0] : NULL, nargs > 1 ? args[1] : NULL};
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    if (nargs > 2)
        return PyErr_Format(PyExc_TypeError, "crc32c() takes at most 2 arguments (%zd given)",
                            nargs + nkw);
    for (Py_ssize_t i = 0; i < nkw; i++) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, i);
        int j = PyUnicode_CompareWithASCIIString(key, "data") == 0    ? 0
                : PyUnicode_CompareWithASCIIString(key, "value") == 0 ? 1 : -1;
        if (j < 0)
            return PyErr_Format(PyExc_TypeError, "crc32c() got an unexpected keyword argument "
                                "'%U'", key);
        if (arg[j] != NULL)
            return PyErr_Format(PyExc_TypeError, "crc32c() got multiple values for argument "
                                "'%s'", names[j]);
        arg[j] = args[nargs + i];
    }
    if (arg[0] == NULL)
        return PyErr_Format(PyExc_TypeError, "crc32c() missing required argument 'data'");
    uint32_t value = 0;
    if (arg[1] != NULL) {       /* any int, taken modulo 2**32, as the package's "I" format */
        unsigned long v = PyLong_AsUnsignedLongMask(arg[1]);
        if (v == (unsigned long)-1 && PyErr_Occurred())
            return NULL;
        value = (uint32_t)v;
    }
    Py_buffer view;             /* bytes, bytearray, contiguous memoryview, mmap... */
    if (PyObject_GetBuffer(arg[0], &view, PyBUF_SIMPLE))
        return NULL;
    crc_fn fn = crc_impls[crc_best];
    uint32_t reg = ~value;
    if (view.len >= CRC_GIL_FREE) {
        Py_BEGIN_ALLOW_THREADS
        reg = fn(reg, view.buf, (size_t)view.len);
        Py_END_ALLOW_THREADS
    } else {
        reg = fn(reg, view.buf, (size_t)view.len);
    }
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(~reg);
}

/* For tests and measurements: name the implementation crc32c() runs, or switch it. */
static PyObject *crc32c_impl(PyObject *self, PyObject *args)
{
    const char *name = NULL;
    if (!PyArg_ParseTuple(args, "|z:_crc32c_impl", &name))
        return NULL;
    const char *current = CRC_NAMES[crc_best];
    for (int i = 0; name != NULL && i < 3; i++)
        if (strcmp(name, CRC_NAMES[i]) == 0 && crc_impls[i] != NULL) {
            crc_best = i;
            name = NULL;
        }
    if (name != NULL)
        return PyErr_Format(PyExc_ValueError, "no crc32c implementation '%s' on this CPU", name);
    return PyUnicode_FromString(current);
}

/* ---- module ---------------------------------------------------------------------------- */

static PyMethodDef methods[] = {
    {"decode_records", decode_records, METH_VARARGS,
     "decode_records(payload, count, base_offset, base_timestamp, log_append_time, "
     "min_offset, topic, partition, cls, out, no_headers=None): append one cls tuple per "
     "record to out."},
    {"decode_columns", decode_columns, METH_VARARGS,
     "decode_columns(segments, min_offset, max_offset, with_headers) -> dict of buffers."},
    {"encode_values", encode_values, METH_VARARGS,
     "encode_values(offsets, data, validity, wide, start, count, timestamp) -> (payload, count, "
     "base_ts, max_ts): keyless records of an Arrow binary column's rows"},
    {"encode_records", encode_records, METH_VARARGS,
     "encode_records(records, now_ms) -> (payload, count, base_timestamp, max_timestamp)."},
    {"crc32c", (PyCFunction)(void (*)(void))crc32c, METH_FASTCALL | METH_KEYWORDS,
     "crc32c(data, value=0) -> the CRC32C of a bytes-like object, continuing `value` (the "
     "CRC of the bytes before it). Releases the GIL from 64 KiB."},
    {"_crc32c_impl", crc32c_impl, METH_VARARGS,
     "_crc32c_impl(name=None) -> the name of the implementation crc32c() runs (\"portable\", "
     "\"sse4.2\" or \"sse4.2+pclmul\"), switching to `name` when given: for tests and "
     "measurements. ValueError for one this CPU cannot run."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "minilog.connector._records_c",
    "C record kernel of minilog; see _records_py.py for the reference it must match.",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__records_c(void)
{
    crc_init();
    return PyModule_Create(&module);
}
