// Fixture kernels for tests/unit/test_cuda.c.  The test finds the lines it
// expects through the MARK comments below, so edit freely but keep them on
// the statements they name, then run `make cuda-fixtures` to refresh the
// committed cubins (used where nvcc is missing).
template <typename T, int N>
__global__ void scale(T *x, T a, int n) // MARK scale_begin
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		x[i] = a * x[i] + N; // MARK scale_store
} // MARK scale_end
template __global__ void scale<float, 4>(float *, float, int);

extern "C" __global__ void axpy(float a, const float *x, float *y, int n) // MARK axpy_begin
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		y[i] = a * x[i] + y[i]; // MARK axpy_store
} // MARK axpy_end
