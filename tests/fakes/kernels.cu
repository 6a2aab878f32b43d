// Kernels for the CUPTI double's cubins (sm_90).  Built with and without
// -lineinfo by tests/fakes/fakes.mk (make gpu-cubins).
extern "C" __global__ void axpy(float a, const float *x, float *y, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		y[i] = a * x[i] + y[i];
}

__global__ void reduce_sum(const float *x, float *out, int n)
{
	__shared__ float buf[256];
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	buf[threadIdx.x] = i < n ? x[i] : 0.0f;
	__syncthreads();
	for (int s = blockDim.x / 2; s > 0; s >>= 1) {
		if (threadIdx.x < s)
			buf[threadIdx.x] += buf[threadIdx.x + s];
		__syncthreads();
	}
	if (threadIdx.x == 0)
		atomicAdd(out, buf[0]);
}

template <typename T>
__global__ void scale(T *x, T f, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		x[i] *= f;
}
template __global__ void scale<float>(float *, float, int);
