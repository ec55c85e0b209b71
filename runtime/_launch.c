/* The launch hot path in C: pack one call's arguments into a kernel-parameter array and call the
 * driver's launch function, whose address the Python driver hands us. cuLaunchKernel and
 * hipModuleLaunchKernel share one signature, declared below, so no CUDA or ROCm header is needed.
 *
 * Per call: no heap allocation (the parameter storage lives on the C stack), the GIL is released
 * around the driver call, and the driver's return code is handed back to Python (0 = success), which
 * turns a failure into an exception carrying the driver's error string.
 *
 * Slot codes (runtime/packing.py): 'p' pointer from tensor.data_ptr(), 'i' int32, 'l' int64, 'f' f32.
 * Values are checked as exactly as the Python path checks them: ints in range, no bools, f32 rounding
 * that does not overflow.
 */
#define PY_SSIZE_T_CLEAN
#define Py_LIMITED_API 0x030A0000    /* stable ABI: one build serves CPython 3.10 and later */
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

typedef int (*launch_fn_t)(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                           unsigned bz, unsigned shared_mem, void *stream, void **params, void **extra);

#define MAX_SLOTS 64

typedef struct {
    PyObject_HEAD
    launch_fn_t launch;
    void *function;
    Py_ssize_t nslots;
    char codes[MAX_SLOTS];
    PyObject *names;        /* tuple of str, one per slot */
    PyObject *symbol;       /* str, for messages */
    unsigned block[3];
} Launcher;

static PyObject *str_data_ptr;

static int read_dim3(PyObject *seq, const char *what, PyObject *symbol, unsigned out[3]) {
    int is_tuple = PyTuple_Check(seq);
    if ((!is_tuple && !PyList_Check(seq)) || PySequence_Size(seq) != 3) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "%U: %s must be a tuple or list of 3 ints, got %R", symbol, what, seq);
        return -1;
    }
    for (Py_ssize_t i = 0; i < 3; i++) {
        PyObject *item = is_tuple ? PyTuple_GetItem(seq, i) : PyList_GetItem(seq, i);   /* borrowed */
        long v = item && PyLong_Check(item) && !PyBool_Check(item) ? PyLong_AsLong(item) : -1;
        if (v < 1 || v > 0x7fffffffL) {
            PyErr_Clear();
            PyErr_Format(PyExc_ValueError, "%U: %s[%zd] must be an int in [1, 2**31-1], got %R", symbol, what, i,
                         item ? item : Py_None);
            return -1;
        }
        out[i] = (unsigned)v;
    }
    return 0;
}

static const char *ctype_name(char code) {
    switch (code) {
    case 'p': return "void*";
    case 'i': return "int32_t";
    case 'l': return "int64_t";
    default: return "float";
    }
}

static int arg_error(Launcher *self, Py_ssize_t i, PyObject *exc, const char *why, PyObject *value) {
    PyErr_Format(exc, "kernel argument %R (%s): %s, got %R", PyTuple_GetItem(self->names, i),
                 ctype_name(self->codes[i]), why, value);
    return -1;
}

/* Convert one value into its 8-byte parameter cell; -1 with an exception set on a bad value. */
static int pack_one(Launcher *self, Py_ssize_t i, PyObject *v, uint64_t *cell) {
    char code = self->codes[i];
    if (code == 'p') {
        PyObject *addr = PyObject_CallMethodObjArgs(v, str_data_ptr, NULL);
        if (!addr) {
            if (PyErr_ExceptionMatches(PyExc_AttributeError)) {
                PyErr_Clear();
                return arg_error(self, i, PyExc_TypeError, "expected a tensor", v);
            }
            return -1;
        }
        unsigned long long a = PyLong_AsUnsignedLongLong(addr);
        Py_DECREF(addr);
        if (a == (unsigned long long)-1 && PyErr_Occurred()) return -1;
        *cell = a;
        return 0;
    }
    if (PyBool_Check(v)) return arg_error(self, i, PyExc_TypeError, "a bool is not accepted", v);
    if (code == 'i' || code == 'l') {
        if (!PyLong_Check(v)) return arg_error(self, i, PyExc_TypeError, "expected an int", v);
        int overflow = 0;
        long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (x == -1 && PyErr_Occurred()) return -1;
        if (overflow || (code == 'i' && (x < INT32_MIN || x > INT32_MAX)))
            return arg_error(self, i, PyExc_ValueError, "out of range", v);
        if (code == 'i') {
            int32_t y = (int32_t)x;
            memcpy(cell, &y, sizeof y);
        } else {
            memcpy(cell, &x, sizeof x);
        }
        return 0;
    }
    /* 'f' */
    if (!PyFloat_Check(v) && !PyLong_Check(v)) return arg_error(self, i, PyExc_TypeError, "expected a float", v);
    double d = PyFloat_AsDouble(v);
    if (d == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        return arg_error(self, i, PyExc_ValueError, "does not fit in f32", v);
    }
    float f = (float)d;
    if (isinf(f) && !isinf(d)) return arg_error(self, i, PyExc_ValueError, "does not fit in f32", v);
    memcpy(cell, &f, sizeof f);
    return 0;
}

static PyObject *wrong_args(Launcher *self, PyObject *args) {
    PyObject *keys = PyDict_Keys(args);
    if (keys) {
        PyErr_Format(PyExc_ValueError, "kernel %U takes arguments %R, got %R", self->symbol, self->names, keys);
        Py_DECREF(keys);
    }
    return NULL;
}

/* launcher(grid, block, args: dict, stream: int) -> driver return code */
static PyObject *Launcher_call(Launcher *self, PyObject *pargs, PyObject *kwargs) {
    PyObject *grid, *block, *args, *stream;
    if (kwargs && PyDict_Size(kwargs)) {
        PyErr_SetString(PyExc_TypeError, "launcher takes positional arguments (grid, block, args, stream)");
        return NULL;
    }
    if (!self->launch) {
        PyErr_SetString(PyExc_RuntimeError, "Launcher was not initialised");
        return NULL;
    }
    if (!PyArg_UnpackTuple(pargs, "launcher", 4, 4, &grid, &block, &args, &stream)) return NULL;
    if (!PyDict_Check(args)) {
        PyErr_SetString(PyExc_TypeError, "args must be a dict of kernel argument name -> value");
        return NULL;
    }
    unsigned g[3], b[3];
    if (read_dim3(grid, "grid", self->symbol, g) || read_dim3(block, "block", self->symbol, b)) return NULL;
    if (b[0] != self->block[0] || b[1] != self->block[1] || b[2] != self->block[2]) {
        PyErr_Format(PyExc_ValueError, "%U was built for block (%u, %u, %u), got %R", self->symbol,
                     self->block[0], self->block[1], self->block[2], block);
        return NULL;
    }
    if (PyDict_Size(args) != self->nslots) return wrong_args(self, args);
    void *s = PyLong_AsVoidPtr(stream);
    if (!s && PyErr_Occurred()) return NULL;

    uint64_t cells[MAX_SLOTS];
    void *params[MAX_SLOTS];
    for (Py_ssize_t i = 0; i < self->nslots; i++) {
        PyObject *v = PyDict_GetItemWithError(args, PyTuple_GetItem(self->names, i));
        if (!v) return PyErr_Occurred() ? NULL : wrong_args(self, args);
        if (pack_one(self, i, v, &cells[i])) return NULL;
        params[i] = &cells[i];
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = self->launch(self->function, g[0], g[1], g[2], b[0], b[1], b[2], 0, s, params, NULL);
    Py_END_ALLOW_THREADS
    return PyLong_FromLong(rc);
}

/* Launcher(launch_fn_address, function_handle, codes, names, block, symbol) */
static int Launcher_init(Launcher *self, PyObject *pargs, PyObject *kwargs) {
    unsigned long long launch_addr, function;
    const char *codes;
    Py_ssize_t ncodes;
    PyObject *names, *block, *symbol;
    if (kwargs && PyDict_Size(kwargs)) {
        PyErr_SetString(PyExc_TypeError, "Launcher takes positional arguments");
        return -1;
    }
    if (!PyArg_ParseTuple(pargs, "KKs#O!OU", &launch_addr, &function, &codes, &ncodes, &PyTuple_Type, &names,
                          &block, &symbol))
        return -1;
    if (!launch_addr || ncodes > MAX_SLOTS || PyTuple_Size(names) != ncodes) {
        PyErr_Format(PyExc_ValueError, "bad launcher description (launch fn %llu, %zd codes, %zd names, max %d)",
                     launch_addr, ncodes, PyTuple_Size(names), MAX_SLOTS);
        return -1;
    }
    for (Py_ssize_t i = 0; i < ncodes; i++) {
        if (!strchr("pilf", codes[i]) || !PyUnicode_Check(PyTuple_GetItem(names, i))) {
            PyErr_Format(PyExc_ValueError, "bad slot %zd", i);
            return -1;
        }
    }
    if (read_dim3(block, "block", symbol, self->block)) return -1;
    Py_INCREF(symbol);
    Py_XDECREF(self->symbol);
    self->symbol = symbol;
    self->launch = (launch_fn_t)(uintptr_t)launch_addr;
    self->function = (void *)(uintptr_t)function;
    self->nslots = ncodes;
    memcpy(self->codes, codes, (size_t)ncodes);
    Py_INCREF(names);
    Py_XDECREF(self->names);
    self->names = names;
    return 0;
}

static void Launcher_dealloc(Launcher *self) {
    PyTypeObject *tp = Py_TYPE(self);
    Py_XDECREF(self->names);
    Py_XDECREF(self->symbol);
    freefunc tp_free = (freefunc)PyType_GetSlot(tp, Py_tp_free);
    tp_free(self);
    Py_DECREF(tp);          /* instances of heap types own a reference to their type */
}

static PyType_Slot launcher_slots[] = {
    {Py_tp_doc, "Launcher(launch_fn_address, function, codes, names, block, symbol): packs kernel arguments "
                "and calls the driver's launch function."},
    {Py_tp_new, PyType_GenericNew},
    {Py_tp_init, Launcher_init},
    {Py_tp_dealloc, Launcher_dealloc},
    {Py_tp_call, Launcher_call},
    {0, NULL},
};

static PyType_Spec launcher_spec = {
    .name = "flyaot.runtime._launch.Launcher",
    .basicsize = sizeof(Launcher),
    .flags = Py_TPFLAGS_DEFAULT,
    .slots = launcher_slots,
};

static struct PyModuleDef launch_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_launch",
    .m_doc = "flyaot's C launch path.",
    .m_size = -1,
};

PyMODINIT_FUNC PyInit__launch(void) {
    str_data_ptr = PyUnicode_InternFromString("data_ptr");
    if (!str_data_ptr) return NULL;
    PyObject *m = PyModule_Create(&launch_module);
    if (!m) return NULL;
    PyObject *type = PyType_FromSpec(&launcher_spec);
    if (!type || PyModule_AddObject(m, "Launcher", type) < 0) {
        Py_XDECREF(type);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
